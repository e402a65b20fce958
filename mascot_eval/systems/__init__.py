"""Systems: turn a context into a multi-agent dialogue (MASCOT, its ablations and the paper's baselines).

``SYSTEMS`` maps a *kind* name to a :class:`~mascot_eval.systems.base.System` subclass (built-ins:
mascot, prompted, self-consistency, multiagentesc; plug-ins through the ``mascot_eval.systems``
entry-point group). Named systems are YAML configs in ``baselines/`` that pick a kind, templates,
decoding and models; see docs/systems.md.
"""

from __future__ import annotations

from typing import Any

from ..registry import Registry

SYSTEMS: Registry[Any] = Registry("system", builtins_module="mascot_eval.systems.builtin")

__all__ = ["SYSTEMS"]
