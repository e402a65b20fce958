"""Registers the built-in system kinds."""

from __future__ import annotations

from . import SYSTEMS
from .mascot import Mascot
from .multiagentesc import MultiAgentESC
from .prompted import Prompted, SelfConsistency

for _cls in (Mascot, Prompted, SelfConsistency, MultiAgentESC):
    SYSTEMS.add(_cls.kind, _cls)
