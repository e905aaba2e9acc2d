"""VipLLaVA against vlreg's conformance suite, run on the installed plugin."""

from vlreg.testing.conformance import VisionConformance
from vlreg.testing.conformance.native import CLIP, composite


class TestVipLlava(VisionConformance):
    """A CLIP tower and a Llama text model served by vlreg-llava; the projector reads two
    of the tower's three blocks, so the last block and the tower's output are read-only."""

    checkpoint = "vipllava"
    native = composite(CLIP)
