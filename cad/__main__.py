"""``python -m cad``: the ``cad`` command line, for environments without the script on PATH."""

from cad.server.cli import main

if __name__ == "__main__":
    main()
