import sys
from pathlib import Path

# exp_factory.py lives next to the tests; make it importable whatever the rootdir/import mode.
sys.path.insert(0, str(Path(__file__).parent))
