"""vlreg-cosmos3-edge: Cosmos3 Edge, declared against `vlreg.plugin`.

Cosmos3EdgeForConditionalGeneration is Qwen2-VL's layout with the projector outside the
tower: the text model at ``model.language_model`` (``cosmos3_edge_text``: Llama blocks with a
two-projection MLP, ``fc1`` and ``fc2``, and M-RoPE), the tower at ``model.visual`` (SigLIP 2's
names over every image's patches packed in one ``[patches, hidden]`` row, attending within
each image by one attention call per image: `vlreg.plugin.PackedVision`,
`vlreg.plugin.PerImageAttention`), its learned position grid resampled to each image
(`vlreg.plugin.LearnedPositions`, `vision.position_embeddings`), and the projector at
``model.projector`` (a 2 x 2 merge of patches, then two linear maps), whose output ``model``'s
first ``inputs_embeds.masked_scatter`` writes into the embeddings and a video's its second
(`vlreg.plugin.VIDEO_SCATTER`).

The image processor emits each image's patches in merge-block order and reports
``image_grid_thw``, as Qwen2-VL's does: the image grids are the adapter ``"qwen_vit"``'s.
A video's frames run through the tower in a call of their own, which no standard tower value
reads; its mask and features are served.

transformers' ``Cosmos3EdgeProcessor`` (5.23 to 5.25) lacks two defaults of Qwen3-VL's processor,
which it is modelled on: it returns no ``mm_token_type_ids``, which the model's forward
requires with any image or video (to place M-RoPE), and asks its video processor for no
metadata, which it requires to write a video's timestamps. The processor vlreg uses is given
both (`as_qwen3_vl`, the wrapper's ``processor=``).
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Text, Tower, Wrapper, adapter

from . import text, vision

def as_qwen3_vl(processor):
    """The processor with Qwen3-VL's defaults: ``mm_token_type_ids`` returned with every
    encoding, a video's metadata asked of the video processor. Setting them again changes
    nothing."""
    processor.return_mm_token_type_ids = True
    processor.videos_kwargs = {**getattr(processor, "videos_kwargs", {}), "return_metadata": True}
    return processor


def builders():
    from .checkpoints import build_cosmos3_edge

    return {"cosmos3_edge": build_cosmos3_edge}


plugin = Plugin(
    Wrapper("cosmos3_edge", vision="model.visual", projector="model.projector", entry=VIDEO_SCATTER,
            processor=lambda part: as_qwen3_vl, image_grids=lambda part: adapter("qwen_vit").image_grids,
            video_grids=lambda part: adapter("qwen_vit").video_grids()),
    Text("cosmos3_edge_text", envoys=text.envoys),
    Tower("cosmos3_edge_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
