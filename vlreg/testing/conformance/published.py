"""A family at a published checkpoint's widths and full depth, built on the meta device (no
weights): the sizes read off its modules, its support table, and what ``vlreg inspect``
reads of its config alone. Stated as data, one class per published config::

    class TestInternVL3(PublishedWidths):
        config = transformers.InternVLConfig      # its defaults are InternVL3's
        checkpoint = "internvl"                   # whose tiny processor the folder gets
        family = "internvl"
        parts = {"vision": ("internvl_vision", "vlreg-internvl"), "text": ("qwen2", "vlreg-llava")}
        published = {"num_layers": 24, "vision.num_heads": 16, "projector.linear_1.weight.shape": (896, 4096)}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, ClassVar

import pytest
import torch

from ..checkpoints import build
from ..kit import load
from .helpers import a_video_row


class PublishedWidths:
    """Subclass it in a ``Test*`` class and set:

    * ``config``: the published config's class, built with ``fields`` (or override
      `published_config`, which is given the tiny tokenizer to take token ids from);
    * ``checkpoint``: the builder whose tiny processor stands in for the published one
      (nothing is processed on meta), unless `published_processor` says otherwise;
    * ``family``: the family's name; ``parts``: each part's ``(model_type, distribution)``;
    * ``published``: sizes by dotted name from the root (``"vision.num_heads"``,
      ``"layers.1.mlp.num_experts"``, ``"projector.linear_1.weight.shape"``), as the lazy
      model reads them; those ``vlreg inspect`` reports it must report the same;
    * ``refused``: the rows of ``support()`` that give a reason, each with a fragment of it
      (every other row is served), or None where the family's own test checks the table
      (it differs between transformers releases); ``read_only``: ``read_only()``'s rows, in
      order, where the family states them; ``aliases``: aliases ``vlreg inspect`` must
      report, by place.

    The class's ``model`` is the lazy load of the published config, for the family's own
    checks beside these."""

    config: ClassVar[Callable[..., Any]]
    fields: ClassVar[dict] = {}
    checkpoint: ClassVar[str]
    family: ClassVar[str]
    parts: ClassVar[dict[str, tuple[str, str]]] = {}
    published: ClassVar[dict[str, Any]] = {}
    refused: ClassVar[dict[str, str] | None] = {}
    read_only: ClassVar[list[str] | None] = None
    aliases: ClassVar[dict[str, dict[str, str]]] = {}

    def published_config(self, tokenizer: Any = None) -> Any:
        """The published config; ``tokenizer`` is the tiny one the folder's processor has
        (None where the config is inspected alone)."""
        return self.config(**self.fields)

    def published_processor(self, tokenizer: Any) -> Any:
        """The processor written beside the config: the tiny checkpoint's."""
        from transformers import AutoProcessor

        return AutoProcessor.from_pretrained(build(self.checkpoint))

    @pytest.fixture(scope="class")
    def folder(self, tmp_path_factory: Any) -> Path:
        from transformers import AutoProcessor

        folder = tmp_path_factory.mktemp(type(self).__name__)
        tokenizer = AutoProcessor.from_pretrained(build(self.checkpoint)).tokenizer
        self.published_processor(tokenizer).save_pretrained(folder)
        self.published_config(tokenizer).save_pretrained(folder)
        return folder

    @pytest.fixture(scope="class")
    def model(self, folder: Path) -> Any:
        return load(folder, dispatch=False)

    def test_the_published_widths_on_meta(self, model):
        assert not model.dispatched and model.family.name == self.family
        assert {kind: part.model_type for kind, part in model.family.parts.items() if kind in self.parts} == {
            kind: model_type for kind, (model_type, _) in self.parts.items()}
        assert {name: read(model, name) for name in self.published} == self.published

    def test_the_support_table_at_the_published_widths(self, model):
        declared = model.family.sentences  # a video's rows the core refuses (no video entry) are VideoConformance's
        reasons = {row: why for row, why in model.support().items()
                   if why is not None and (not a_video_row(row) or row in declared)}
        if self.refused is not None:
            assert set(reasons) == set(self.refused), reasons
            for row, fragment in self.refused.items():
                assert fragment in reasons[row], (row, reasons[row])
        if self.read_only is not None:
            assert [row for row in model.read_only() if not a_video_row(row)] == list(self.read_only)

    def test_inspect_reads_the_config_alone(self, model, tmp_path, capsys):
        """No processor, no weights: the family, its parts and who serves them, the sizes,
        and the rows of the support table a load with the processor has."""
        from ...cli import main
        from ...inspection import described

        self.published_config().save_pretrained(tmp_path)
        assert main(["inspect", str(tmp_path), "--json"]) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["family"] == self.family and report["class"] == type(model._module).__name__
        assert report["no_images"] is None
        for kind, (model_type, distribution) in self.parts.items():
            assert report["parts"][kind]["model_type"] == model_type and f"({distribution} " in report["parts"][kind]["plugin"]
        for name, value in self.published.items():
            where, _, size = name.rpartition(".")
            reported = report["sizes"] if not where else report["vision sizes"] if where == "vision" else {}
            if size in reported:
                assert reported[size] == value, name
        assert list(report["support"]) == list(model.support()), "inspect's rows are not those a load with a processor has"
        for place, expected in self.aliases.items():
            assert {name: report["aliases"][place][name] for name in expected} == expected, place
        shown = described(str(tmp_path), report)  # what `vlreg inspect` prints without --json (built once here)
        assert f"family {self.family!r}" in shown and "holds no processor" in shown and "vision.image_features" in shown


def read(model: Any, name: str) -> Any:
    """The value at a dotted name from the model (a number indexes a list), a tensor
    shape as a tuple."""
    value = model
    for part in name.split("."):
        value = value[int(part)] if part.isdigit() else getattr(value, part)
    return tuple(value) if isinstance(value, torch.Size) else value
