"""Train the toy model and its dictionary from their recipes and write them where vlreg
ships them (``vlreg/testing/shipped``): ``python -m vlreg.testing.ship``.

Run it after changing `toy.RECIPE`, `toy.VERSION` or the toy's training code (or, with
``--dictionary-only``, the dictionary's recipe or trainer): `toy.build()` and
`dictionary.build()` refuse a recipe the shipped files were not trained from.
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
    parser.add_argument("--dictionary-only", action="store_true",
                        help="keep the shipped toy; train and ship its dictionary again (after a change of "
                             "dictionary.RECIPE or of the trainer)")
    arguments = parser.parse_args(argv)
    if not arguments.dictionary_only:
        scratch = toy.SHIPPED.with_name(".toy-training")
        shutil.rmtree(scratch, ignore_errors=True)
        report = toy_training.train(scratch, threads=arguments.threads)
        shutil.rmtree(toy.SHIPPED, ignore_errors=True)
        scratch.rename(toy.SHIPPED)
        print(f"toy: held-out accuracy {report['held_out_accuracy']:.1%}, trained in {report['train_seconds']:.0f} s, "
              f"in {toy.SHIPPED}")
    scratch = dictionary.SHIPPED.with_name(".dictionary-training")
    shutil.rmtree(scratch, ignore_errors=True)
    found = dictionary.train(dictionary.load_model(), scratch, threads=arguments.threads)
    shutil.rmtree(dictionary.SHIPPED, ignore_errors=True)
    scratch.rename(dictionary.SHIPPED)
    evaluation = found["evaluation"]
    print(f"dictionary: {evaluation['explained_variance']:.2%} of the variance explained, {evaluation['l0']} "
          f"features active a token, in {dictionary.SHIPPED}")
    size = sum(f.stat().st_size for f in toy.SHIPPED.parent.rglob("*") if f.is_file())
    print(f"shipped: {size / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
