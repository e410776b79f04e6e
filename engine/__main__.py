"""``python -m cad.engine``: the same as ``cad-engine``."""

from cad.engine.launcher import main

if __name__ == "__main__":
    main()
