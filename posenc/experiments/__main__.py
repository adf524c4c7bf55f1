"""``python -m posenc.experiments NAME ...``: see :mod:`posenc.experiments.cli`."""

from posenc.experiments.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
