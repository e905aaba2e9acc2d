"""The LLaVA wrappers: what each leaves unserved.

All are transformers' composite layout (the text model at ``model.language_model``, the
projector at ``model.multi_modal_projector``), and write the image features into the token embeddings
in their ``model``'s forward with its first ``inputs_embeds.masked_scatter(mask,
features)``; the video lines' (OneVision's, LLaVA-NeXT-Video's, Video-LLaVA's) second is
the video's. The tower is ``model.vision_tower``, except on Video-LLaVA, which has two
towers of one class: ``model.image_tower`` (served as ``vision``) and ``model.video_tower``
(only a video's frames run through it: ``vision.video_tower``, its values the video's call's).

A video's frames run through the tower in a call of their own (LLaVA-NeXT-Video pools each
frame's patches 2 x 2 before the projector, OneVision after it; Video-LLaVA runs them through
its video tower) and are written at the second scatter, where ``vision.video_features`` is read.

The projector is the last module before that call, but neither end of it is a tower
value: its input is the stream the config selects (``vision_feature_layer``, with the
CLS row dropped under the "default" strategy), and on LLaVA-NeXT its output is still
cut per crop, unpadded and given newline rows before the scatter (on OneVision, also
shrunk where the image has many tiles). So
``projector.input`` and ``projector.output`` are served as they are, and
``vision.image_features`` is read at the scatter.

Because the projector reads a block's stream out of the tower's ``hidden_states``, a
write to ``vision.tower_output`` reaches nothing, and neither does one to a block after
the one it reads (block -2's stream on LLaVA-1.5: the last block runs for nothing): both
are declared read-only, naming the value to edit instead.
"""

import math

from vlreg.plugin import FEATURE_LAYER_READ_ONLY, frame_grids, read_only

#: Video-LLaVA's video tower (``vision.video_tower``) feeds its projector as the image tower
#: does: the stream of block ``vision_feature_layer``, so its output reaches nothing either.
VIDEO_TOWER_OUTPUT = read_only(lambda tower: (
    f"the projector reads the video tower's hidden_states[{tower.root._module.config.vision_feature_layer}] "
    f"(vision_feature_layer), not its output; edit that block's layer_output"))
#: What each wrapper refuses: the tower values the projector does not read (every line). The
#: video lines run a video's frames through the image's tower (LLaVA-OneVision pools them 2 x 2
#: after the projector, LLaVA-NeXT-Video before it), except Video-LLaVA, through a tower of its own.
REFUSES = {
    "llava": FEATURE_LAYER_READ_ONLY,
    "llava_onevision": FEATURE_LAYER_READ_ONLY,
    "llava_next_video": FEATURE_LAYER_READ_ONLY,
    "video_llava": {**FEATURE_LAYER_READ_ONLY, "vision.video_tower.tower_output": VIDEO_TOWER_OUTPUT},
}


def onevision_video_grids(config):
    """``vlreg_video_grids`` for LLaVA-OneVision: each frame resized whole to the tower's input,
    its grid of patches pooled to half a side (rounded up, bilinearly) a token, frame by frame,
    then one newline token for the whole video."""
    patches = config.vision_config.image_size // config.vision_config.patch_size
    side, fold = math.ceil(patches / 2), 2 if patches % 2 == 0 else None  # an odd side is resampled, not folded
    return lambda encoding, videos, processor: [frame_grids(video, side, side, fold=fold, newline=True)
                                                for video in videos]
