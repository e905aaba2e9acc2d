"""The toy model's task (`vlreg.testing.toy`): its scenes, each a picture of three coloured
shapes and a question naming one, the chat template that asks it, and the training recipe
with its key."""

from __future__ import annotations

import functools
import hashlib
import json
import random
from typing import Any

from attrs import frozen

#: Changes whenever this code or `toy_training`'s changes what gets trained: part of the cache key.
VERSION = "toy-2"

COLOURS = {
    "red": (215, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 215),
    "yellow": (230, 200, 30),
    "purple": (140, 60, 180),
    "orange": (245, 135, 30),
}
SHAPES = ("square", "circle", "triangle")
BACKGROUND = (235, 235, 235)
SIDE, CELL = 168, 28  # a scene's side and one image token's cell, in pixels
GRID = SIDE // CELL

RECIPE = {
    "version": VERSION,
    "seed": 0,
    "steps": 800,
    "images_per_step": 16,
    "lr": 1e-3,
    "warmup": 50,
    "weight_decay": 0.01,
    "aux_weight": 1.0,
    "shape_pixels": (18, 26),
    "text": {"hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 2, "mrope_section": [4, 6, 6]},
    "vision": {"embed_dim": 64, "depth": 2, "num_heads": 4, "mlp_ratio": 2},
}

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")

#: Qwen's chat format without a default system turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for item in message['content'] %}"
    "{% if item['type'] == 'image' or 'image' in item %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif item['type'] == 'video' or 'video' in item %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in item %}{{ item['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@frozen
class Scene:
    """One example: ``image`` (168 x 168, PIL), ``prompt`` (the chat-template text with
    the image placeholder), ``answer`` (the asked shape's colour, one token) and
    ``target_box`` ``(x0, y0, x1, y1)``, the asked shape's box in the image's pixels
    (half-open). ``shapes`` maps each shape to its ``(colour, box)``."""

    image: Any
    prompt: str
    answer: str
    target_box: tuple[int, int, int, int]
    shape: str
    shapes: dict[str, tuple[str, tuple[int, int, int, int]]]

    def recoloured(self, colour: str) -> "Scene":
        """The same scene with the asked shape's colour swapped with the shape of
        ``colour`` (or, if no shape has it, just repainted): for patching."""
        shapes = dict(self.shapes)
        mine, box = shapes[self.shape]
        for other, (theirs, their_box) in shapes.items():
            if theirs == colour:
                shapes[other] = (mine, their_box)
        shapes[self.shape] = (colour, box)
        return Scene(draw(shapes), self.prompt, colour, self.target_box, self.shape, shapes)


@functools.cache
def prompt(shape: str) -> str:
    """The question, before the image, through the chat template (rendered once per
    shape: compiling the template took a third of training's time when done per scene)."""
    from jinja2 import Template

    messages = [{"role": "user", "content": [{"type": "text", "text": f"What color is the {shape}?"}, {"type": "image"}]}]
    return Template(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)


def draw(shapes: dict[str, tuple[str, tuple[int, int, int, int]]]) -> Any:
    """A scene's picture from each shape's colour and box."""
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (SIDE, SIDE), BACKGROUND)
    pen = ImageDraw.Draw(picture)
    for shape, (colour, (x0, y0, x1, y1)) in shapes.items():
        fill = COLOURS[colour]
        if shape == "square":
            pen.rectangle((x0, y0, x1 - 1, y1 - 1), fill=fill)
        elif shape == "circle":
            pen.ellipse((x0, y0, x1 - 1, y1 - 1), fill=fill)
        else:
            pen.polygon((((x0 + x1 - 1) / 2, y0), (x0, y1 - 1), (x1 - 1, y1 - 1)), fill=fill)
    return picture


def scene(rng: random.Random, sizes: tuple[int, int]) -> Scene:
    """A scene drawn from ``rng``, each shape's side within ``sizes`` pixels."""
    cells = rng.sample(range(GRID * GRID), len(SHAPES))
    colours = rng.sample(sorted(COLOURS), len(SHAPES))
    shapes = {}
    for shape, cell, colour in zip(SHAPES, cells, colours):
        side = rng.randint(*sizes)
        x0 = (cell % GRID) * CELL + rng.randint(1, CELL - 1 - side)
        y0 = (cell // GRID) * CELL + rng.randint(1, CELL - 1 - side)
        shapes[shape] = (colour, (x0, y0, x0 + side, y0 + side))
    asked = rng.choice(SHAPES)
    return Scene(draw(shapes), prompt(asked), shapes[asked][0], shapes[asked][1], asked, shapes)


def scenes(n: int, seed: int = 0, recipe: dict | None = None) -> list[Scene]:
    """``n`` held-out scenes: drawn from a seed stream that training never uses."""
    recipe = RECIPE if recipe is None else recipe
    rng = random.Random(f"held-out {seed}")
    return [scene(rng, recipe["shape_pixels"]) for _ in range(n)]


def key(recipe: dict | None = None) -> str:
    """The recipe's key (by default `RECIPE`'s): a hash of the whole recipe, its code
    version included."""
    recipe = RECIPE if recipe is None else recipe
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]
