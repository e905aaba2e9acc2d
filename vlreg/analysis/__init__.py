"""Seeing into the image: analyses over image tokens, on the standard names of any family.

Each helper runs its traces itself and returns tensors laid out per image, with an axis
over that image's tokens in sequence order, and the `ImageGeometry` that maps those tokens
to pixels, so any per-token score can be drawn with `vlreg.pictures.overlay`. A prompt
carries its images in one invoke (nnsight batches no images across invokes), so every
helper takes one prompt, or a list of prompts, with its images, as ``model.trace`` does.

* `logit_lens` (`lens`): the readout at every image token after each block;
* `ablate_image`, `occlusion`, `patch_image` (`edits`): the image's features replaced,
  token by token, or a block's output at its tokens taken from a run on another image;
* `attention_to_images`, `tower_patterns` (`attention`): a text token's attention to each
  image's tokens, and the tower's own pattern on the image's token grid;
* `project_on_vocab`, `top_tokens`, `next_token_probs` (`lens`): the readout of any
  stream value, the likeliest tokens, the next token's distribution;
* `steer`, `skip_layers` (`steering`): edits to call inside a trace or a generation;
* `compare_streams` (`compare`): two models' streams block by block on the same text;
* `attribution_patching` (`attribution`): the first-order effect of patching every token of
  every block from a corrupt run, from one backward (AtP, with AtP*'s keys and queries);
* `saliency`, `integrated_gradients` (`saliency`): gradient x input and integrated gradients
  at the image tokens and at the pixels of the image as given;
* `relevancy` (`relevancy`): gradient-weighted attention relevancy of each image token
  through the text blocks (Chefer et al. 2021);
* `attention_to_frames`, `occlude_frames`, `occlude_video_tokens`, `patch_frame` (`videos`):
  a text token's attention to each frame of a video, its logit's drop with a frame's features
  zeroed or one video token's replaced, and a block's output at a frame patched from another video.
"""

from .attribution import Attribution, attribution_patching
from .relevancy import Relevancy, relevancy
from .saliency import IntegratedGradients, Saliency, integrated_gradients, saliency
from .attention import ImageAttention, TowerPatterns, attention_to_images, tower_patterns
from .compare import compare_streams
from .edits import Ablation, Occlusion, Patching, ablate_image, occlusion, patch_image
from .lens import LogitLens, logit_lens, next_token_probs, project_on_vocab, top_tokens
from .steering import skip_layers, steer
from .tokens import token_id
from .videos import FramePatching, FrameScores, TokenScores, attention_to_frames, occlude_frames, occlude_video_tokens, patch_frame

__all__ = [
    "FrameScores",
    "attention_to_frames",
    "occlude_frames",
    "TokenScores",
    "occlude_video_tokens",
    "FramePatching",
    "patch_frame",
    "LogitLens",
    "logit_lens",
    "Ablation",
    "ablate_image",
    "Occlusion",
    "occlusion",
    "Patching",
    "patch_image",
    "ImageAttention",
    "attention_to_images",
    "TowerPatterns",
    "tower_patterns",
    "token_id",
    "project_on_vocab",
    "top_tokens",
    "next_token_probs",
    "steer",
    "skip_layers",
    "compare_streams",
    "Attribution",
    "attribution_patching",
    "Saliency",
    "saliency",
    "IntegratedGradients",
    "integrated_gradients",
    "Relevancy",
    "relevancy",
]
