"""mascot-eval: evaluation harness for multi-agent socio-collaborative companions."""

import os as _os

# Idle OpenMP threads of the local models (torch) otherwise spin on the CPU; on a small machine
# that starves the process's other threads and any server beside it (measured here: 2.5 vs 23
# tokens/s for the embedded model on a busy 2-core machine). Must be set before torch loads;
# an explicit setting wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
