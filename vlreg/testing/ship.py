"""Train the toy model and its dictionary from their recipes and write them where vlreg
ships them (``vlreg/testing/shipped``): ``python -m vlreg.testing.ship``.

Run it after changing `toy.RECIPE`, `toy.VERSION` or the toy's training code (or the
dictionary's): `toy.build()` refuses a recipe the shipped files were not trained from.
Training is on one thread by default, so the weights do not depend on the machine's core
count; it takes a few minutes on a quiet machine. Then regenerate what the shipped
weights feed and commit it with them: the docs' pictures (``vlreg demo --out
docs/images``), the output each doc block prints (``python tests/doc_blocks.py
docs/seeing-into-the-image.md``, which rewrites the ``text`` blocks the doc tests compare,
and the README's by hand), and the measured figures in the guide's prose (printed by
``pytest tests/test_toy.py tests/test_dictionary_toy.py -s``).
"""

from __future__ import annotations

import argparse
import shutil
import sys

from . import dictionary, toy, toy_training


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vlreg.testing.ship", description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads while training (default: 1)")
    arguments = parser.parse_args(argv)
    scratch = toy.SHIPPED.with_name(".toy-training")
    shutil.rmtree(scratch, ignore_errors=True)
    report = toy_training.train(scratch, threads=arguments.threads)
    shutil.rmtree(toy.SHIPPED, ignore_errors=True)
    scratch.rename(toy.SHIPPED)
    print(f"toy: held-out accuracy {report['held_out_accuracy']:.1%}, trained in {report['train_seconds']:.0f} s, "
          f"in {toy.SHIPPED}")
    trained, found = dictionary.train(dictionary.load_model(), threads=arguments.threads)
    dictionary.write_report(dictionary.SHIPPED, found)
    trained.save(dictionary.SHIPPED)
    print(f"dictionary: {found['variance_explained']:.2%} of the variance explained, {found['active_per_token']} "
          f"features active a token, in {dictionary.SHIPPED}")
    size = sum(f.stat().st_size for f in toy.SHIPPED.parent.rglob("*") if f.is_file())
    print(f"shipped: {size / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
