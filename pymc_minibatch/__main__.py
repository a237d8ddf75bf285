"""``python -m pymc_minibatch demo``: the package's main job (see :mod:`pymc_minibatch.demo`)."""

import sys


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] != "demo":
        print("usage: python -m pymc_minibatch demo [options]   (demo --help for the options)")
        return 2
    from pymc_minibatch.demo import main as demo_main

    demo_main(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
