"""PP-Chart2Table, served by vlreg-got-ocr2 as GOT-OCR 2.0's model under another config and
processor: its template writes an image's tokens out (its processor expands nothing), an
image's placeholder is that run. (That a trace's logits are the model's own, on its
processor's encoding, the suite checks.)"""

from __future__ import annotations

import pytest
from transformers import PPChart2TableProcessor

from vlreg.testing import chat
from vlreg.testing.conformance import image


CHECKPOINT = "pp_chart2table"


def test_its_template_writes_the_image_tokens_out(model):
    assert type(model.processor) is PPChart2TableProcessor
    assert chat(model, text="Chart to table").count("<imgpad>") == 16


def test_an_image_is_a_run_of_its_tokens(model):
    pictures = [image(80, 60), image(30, 50, seed=1)]
    geometries = model.vision.geometry(chat(model, text="Chart to table", images=2), pictures)
    assert [geometry.tokens for geometry in geometries] == [16, 16]
    with pytest.raises(ValueError, match=r"holds 2 image placeholders \('<imgpad>'\), but 1 image was given"):
        with model.trace(chat(model, text="Chart to table", images=2), images=pictures[:1]):
            model.logits.save()
