"""A file-type command-line tool on Magika, as a cx_Freeze or PyInstaller user writes one.

``filetype FILE...`` prints one JSON line per file: the content type Magika's model gives it.
"""

import json
import sys
from pathlib import Path


def main() -> int:
    from magika import Magika

    magika = Magika()
    for path in sys.argv[1:]:
        print(json.dumps(magika.identify_path(Path(path)).output.label), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
