"""A tower beside the first: the projector's second tower (DeepSeek-VL-Hybrid's), or one only a
video's frames run through (Video-LLaVA's). Each is the family's `Vision` class without the
values where the image meets the text model, made once a process and named in a remote
request by its maker (`made_by`), so a server makes the same class."""

from __future__ import annotations

import functools

from ..serving.reference import made_by
from .vision import VIDEO_VALUES


@functools.cache
def as_second_tower(vision: type) -> type:
    """``vision`` (a `Vision` class) as a second tower (`Scatter.second_tower`, mounted at
    ``model.vision.second_tower``): its own values and blocks, without those where the image
    meets the text model (the mask, the features), which are the first tower's. Made once a
    process, and named in a remote request as this function's (`made_by`)."""
    meeting = ("image_token_mask", "image_features", *VIDEO_VALUES)
    return type(f"Second{vision.__name__}", (vision,), {"__doc__": vision.__doc__, **dict.fromkeys(meeting),
                                                        **made_by(as_second_tower, vision)})


@functools.cache
def as_video_tower(vision: type) -> type:
    """``vision`` (a `Vision` class) as a tower only a video's frames run through
    (`Scatter.video_tower`, mounted at ``model.vision.video_tower``: Video-LLaVA's): its own
    values and blocks, the video's call's, on a run that carries a video; the mask and
    features are the first tower's. Made once a process, and named remotely, as `as_second_tower`'s."""
    meeting = ("image_token_mask", "image_features", *VIDEO_VALUES)
    return type(f"Video{vision.__name__}", (vision,), {"__doc__": vision.__doc__, "videos_only": True,
                                                       **dict.fromkeys(meeting), **made_by(as_video_tower, vision)})
