"""Training the toy model (`vlreg.testing.toy`) from its recipe (`toy_scenes.RECIPE`), and
the processor it ships.

Training is torch only: the transformers model's own tower, embedding, text blocks and
readout, run by hand so the tower runs once per image for its three questions. What
makes it learn fast (800 steps, 100 % held out): the question before the image; the
answer's loss at every position after the image; an auxiliary loss on the tower's output
at each image token (linear probes for the shape and the colour in its cell, dropped
after training), so each token holds its own cell's content; and shapes large enough
(18 to 26 pixels) that a square and a circle differ. The shipped toy was trained on one
thread, seeded, so it is the same on any machine's core count; more threads give other
bits of the same accuracy.
"""

from __future__ import annotations

import functools
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch

from .toy_scenes import CELL, CHAT_TEMPLATE, COLOURS, GRID, RECIPE, SHAPES, SIDE, SPECIAL_TOKENS, Scene, key, scene, scenes


def processor() -> Any:
    """The real Qwen2-VL processor: a BPE tokenizer trained on the task's sentences (each
    colour and shape word one token, with and without a leading space), images kept at
    168 x 168, and the chat template."""
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor
    from transformers.models.qwen2_vl.video_processing_qwen2_vl import Qwen2VLVideoProcessor

    from .checkpoints import tokenizer

    words = [*COLOURS, *SHAPES]
    corpus = [f"What color is the {shape}? The {shape} is {colour}." for shape in SHAPES for colour in COLOURS]
    tok = tokenizer(SPECIAL_TOKENS, corpus * 4 + words * 8 + ["user", "assistant"] * 8,
                    vocab_size=400, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    for word in words:
        for spelling in (word, " " + word):
            if len(tok.encode(spelling, add_special_tokens=False)) != 1:
                raise RuntimeError(f"the toy tokenizer splits {spelling!r}: widen its corpus")
    size = {"min_pixels": SIDE * SIDE, "max_pixels": SIDE * SIDE}
    return Qwen2VLProcessor(image_processor=Qwen2VLImageProcessor(**size), video_processor=Qwen2VLVideoProcessor(**size),
                            tokenizer=tok, chat_template=CHAT_TEMPLATE)


def _config(recipe: dict, tok: Any) -> Any:
    from transformers import Qwen2VLConfig

    ids = dict(zip(SPECIAL_TOKENS, tok.convert_tokens_to_ids(list(SPECIAL_TOKENS))))
    text = dict(recipe["text"])
    section = text.pop("mrope_section")
    common = {"tie_word_embeddings": True, "bos_token_id": None, "eos_token_id": ids["<|im_end|>"],
              "pad_token_id": ids["<|endoftext|>"]}
    return Qwen2VLConfig(
        text_config={"vocab_size": len(tok), **text, "max_position_embeddings": 256,
                     "rope_scaling": {"type": "mrope", "mrope_section": section, "rope_theta": 10000.0}, **common},
        vision_config={**recipe["vision"], "hidden_size": text["hidden_size"], "patch_size": 14,
                       "spatial_merge_size": 2, "temporal_patch_size": 2},
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"], **common,
    )


def pixels(pictures: list, image_processor: Any) -> torch.Tensor:
    """The image processor's ``pixel_values`` for scenes, made in one batch (the processor
    takes about 10 ms a picture, the whole training's data time otherwise): scaled,
    normalised, each 14-pixel patch repeated over the two frames, in 2 x 2 merge blocks."""
    import numpy as np

    patch, merge, frames = image_processor.patch_size, image_processor.merge_size, image_processor.temporal_patch_size
    x = torch.from_numpy(np.stack([np.asarray(p, dtype=np.float32) for p in pictures])).permute(0, 3, 1, 2)
    mean, std = (torch.tensor(v, dtype=torch.float32)[:, None, None] for v in (image_processor.image_mean, image_processor.image_std))
    x = (x * image_processor.rescale_factor - mean) / std
    n, side = x.shape[0], SIDE // patch
    x = x.reshape(n, 3, side // merge, merge, patch, side // merge, merge, patch).permute(0, 2, 5, 3, 6, 1, 4, 7)
    return x.unsqueeze(6).expand(-1, -1, -1, -1, -1, -1, frames, -1, -1).reshape(n * side * side, -1)


class _Batches:
    """Training batches: each image once through the tower, asked all three questions.

    Every prompt has the same tokens but the shape word, so one encoding gives the image
    tokens' positions, the M-RoPE positions and where the shape word is."""

    def __init__(self, model: Any, processor: Any, recipe: dict, rng: random.Random):
        self.processor, self.recipe, self.rng = processor, recipe, rng
        self.words = torch.tensor([processor.tokenizer.encode(" " + shape)[0] for shape in SHAPES])
        self.answers = dict(zip(COLOURS, processor.tokenizer.convert_tokens_to_ids(list(COLOURS))))
        probe = scene(random.Random(0), recipe["shape_pixels"])
        encoding = processor(text=[probe.prompt], images=[probe.image], return_tensors="pt")
        ids = encoding["input_ids"][0]
        self.ids = ids
        self.image = (ids == model.config.image_token_id).nonzero()[:, 0]
        self.asked = int((ids[:, None] == self.words).any(-1).nonzero()[0, 0])
        self.after = int(self.image[-1]) + 1
        self.grid = encoding["image_grid_thw"]
        self.positions, _ = model.model.get_rope_index(ids[None], encoding["mm_token_type_ids"], self.grid)

    def next(self) -> dict[str, torch.Tensor]:
        drawn = [scene(self.rng, self.recipe["shape_pixels"]) for _ in range(self.recipe["images_per_step"])]
        ids = self.ids.repeat(len(drawn) * len(SHAPES), 1)
        ids[:, self.asked] = self.words.repeat(len(drawn))
        answers = torch.tensor([self.answers[s.shapes[shape][0]] for s in drawn for shape in SHAPES])
        cell_shape = torch.zeros(len(drawn), GRID * GRID, dtype=torch.long)
        cell_colour = torch.zeros_like(cell_shape)
        for i, s in enumerate(drawn):
            for k, (shape, (colour, (x0, y0, _, _))) in enumerate(s.shapes.items()):
                cell = (y0 // CELL) * GRID + x0 // CELL
                cell_shape[i, cell], cell_colour[i, cell] = k + 1, list(COLOURS).index(colour) + 1
        return {"pixel_values": pixels([s.image for s in drawn], self.processor.image_processor),
                "grid": self.grid.expand(len(drawn), -1), "ids": ids,
                "answers": answers, "cell_shape": cell_shape.reshape(-1), "cell_colour": cell_colour.reshape(-1)}


def _forward(model: Any, batches: _Batches, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer logits at every position after the image, ``[prompts, positions,
    vocab]``, and the tower's output, ``[images * tokens, hidden]``."""
    features = model.model.visual(batch["pixel_values"], grid_thw=batch["grid"]).pooler_output
    text = model.model.language_model
    embeds = text.embed_tokens(batch["ids"])
    per_image = features.reshape(batch["grid"].shape[0], -1, features.shape[-1])
    embeds[:, batches.image] = per_image.repeat_interleave(len(SHAPES), 0)
    positions = batches.positions.expand(-1, embeds.shape[0], -1)
    hidden = text(inputs_embeds=embeds, position_ids=positions).last_hidden_state
    return model.lm_head(hidden[:, batches.after :]), features


def _patches(embed: Any, pixels: torch.Tensor) -> torch.Tensor:
    """The tower's patch embedding, a ``Conv3d`` whose stride is its kernel, as the one
    matmul it is: five times faster on the CPU, forward and backward, same weights."""
    weight = embed.proj.weight
    return pixels.to(weight.dtype) @ weight.reshape(weight.shape[0], -1).T


def train(path: "str | os.PathLike", recipe: dict | None = None, threads: int = 1) -> dict:
    """Train the toy from scratch on fresh scenes and save it to ``path``; returns what is
    also written to ``toy.json`` (the recipe and its key, seconds, threads, the torch and
    transformers versions, held-out accuracy on the recipe's ``held_out`` scenes, 300 where it
    names none). On one thread (the default)
    the weights are the same on any machine's core count; more threads are faster and
    give other bits."""
    import transformers
    from transformers import Qwen2VLForConditionalGeneration

    recipe = RECIPE if recipe is None else recipe
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    started = time.perf_counter()
    try:
        torch.manual_seed(recipe["seed"])
        proc = processor()
        config = _config(recipe, proc.tokenizer)
        config._attn_implementation = "sdpa"
        model = Qwen2VLForConditionalGeneration(config).train()
        embed = model.model.visual.patch_embed
        embed.forward = functools.partial(_patches, embed)  # training only: the saved model is untouched
        hidden = config.text_config.hidden_size
        probes = torch.nn.ModuleList([torch.nn.Linear(hidden, len(SHAPES) + 1), torch.nn.Linear(hidden, len(COLOURS) + 1)])
        batches = _Batches(model, proc, recipe, random.Random(f"train {recipe['seed']}"))
        optimiser = torch.optim.AdamW([*model.parameters(), *probes.parameters()], lr=recipe["lr"],
                                      weight_decay=recipe["weight_decay"])
        steps, warmup = recipe["steps"], recipe["warmup"]
        schedule = torch.optim.lr_scheduler.LambdaLR(
            optimiser, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
        for step in range(steps):
            batch = batches.next()
            logits, features = _forward(model, batches, batch)
            answers = batch["answers"][:, None].expand(-1, logits.shape[1])
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), answers.flatten())
            aux = (torch.nn.functional.cross_entropy(probes[0](features), batch["cell_shape"])
                   + torch.nn.functional.cross_entropy(probes[1](features), batch["cell_colour"]))
            optimiser.zero_grad()
            (loss + recipe["aux_weight"] * aux).backward()
            optimiser.step()
            schedule.step()
            if step % 50 == 0 or step == steps - 1:
                print(f"toy step {step + 1} of {steps} at {time.perf_counter() - started:.0f} s: answer loss "
                      f"{loss.item():.4f}, aux {aux.item():.4f}", file=sys.stderr, flush=True)
        seconds = time.perf_counter() - started
        del embed.forward
        model.eval()
        accuracy = _accuracy(model, proc, scenes(recipe.get("held_out", 300), recipe=recipe))
    finally:
        torch.set_num_threads(before)
    model.config._attn_implementation = "eager"
    model.save_pretrained(path)
    proc.save_pretrained(path)
    report = {"recipe": recipe, "key": key(recipe), "train_seconds": round(seconds, 1), "threads": threads,
              "torch": torch.__version__, "transformers": transformers.__version__, "held_out_accuracy": accuracy}
    (Path(path) / "toy.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


@torch.no_grad()
def _accuracy(model: Any, proc: Any, held_out: list[Scene]) -> float:
    """Accuracy of the answer at the last position, through the model's own forward."""
    right = 0
    for start in range(0, len(held_out), 50):
        chunk = held_out[start : start + 50]
        encoding = proc(text=[s.prompt for s in chunk], images=[s.image for s in chunk], return_tensors="pt")
        logits = model(**encoding).logits[:, -1]
        right += sum(proc.tokenizer.decode(int(i)) == s.answer for i, s in zip(logits.argmax(-1), chunk))
    return right / len(held_out)
