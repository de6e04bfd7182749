import sys
from pathlib import Path

# the experiment tests' factories (tests/experiment/exp_factory.py) build the fixtures here
sys.path.insert(0, str(Path(__file__).parent.parent / "experiment"))
sys.path.insert(0, str(Path(__file__).parent))
