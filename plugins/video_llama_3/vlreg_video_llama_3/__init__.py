"""vlreg-video-llama-3: VideoLLaMA 3, declared against `vlreg.plugin`.

VideoLlama3ForConditionalGeneration holds the text model at ``model.language_model`` (a
``qwen2`` model, served by vlreg-llava's claim), the tower at ``model.vision_model`` (SigLIP's
names over every image's patches packed in one ``[patches, hidden]`` row, 2-D rotary positions
inside its attention, one attention call per image: `vlreg.plugin.PackedVision`,
`vlreg.plugin.PerImageAttention`) and the projector at ``model.projector`` (two linear maps
over each token), whose output ``model``'s first ``inputs_embeds.masked_scatter`` writes into
the embeddings, a video's its second (`vlreg.plugin.VIDEO_SCATTER`; after the video processor's
token compression drops the tokens it drops, so the features are what the text model receives).

Its image processor merges no patches (``merge_size`` 1): an image token is a patch, in
raster order, and the tower's closing ``pixel_unshuffle`` leaves an image's stream as it is;
the grids are the adapter ``"qwen_vit"``'s over ``image_grid_thw``. A video's frames run
through the tower in a call of their own, which no standard tower value reads.
"""

from vlreg.plugin import VIDEO_SCATTER, Plugin, Tower, Wrapper, adapter

from . import vision



def builders():
    from .checkpoints import build_video_llama_3

    return {"video_llama_3": build_video_llama_3}


plugin = Plugin(
    Wrapper("video_llama_3", vision="model.vision_model", projector="model.projector", entry=VIDEO_SCATTER,
            image_grids=lambda part: adapter("qwen_vit").image_grids),
    Tower("video_llama_3_vision", rename=vision.RENAME, envoys=vision.envoys),
    checkpoints=builders,
)
