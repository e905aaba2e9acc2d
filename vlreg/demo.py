"""``vlreg demo``: build a small checkpoint, trace an image prompt, print what was read,
and with ``--out`` draw what the analysis helpers find onto the image."""

from __future__ import annotations

from pathlib import Path

import torch


def picture(width: int = 112, height: int = 84):
    """A synthetic photo: a colour gradient with a red square in it."""
    from PIL import Image

    x = torch.linspace(0, 1, width).expand(height, width)
    y = torch.linspace(0, 1, height).unsqueeze(1).expand(height, width)
    pixels = torch.stack([x, y, 1 - x], -1)
    pixels[height // 4 : height // 2, width // 4 : width // 2] = torch.tensor([1.0, 0.0, 0.0])
    return Image.fromarray((pixels * 255).to(torch.uint8).numpy())


def scene(width: int = 448, height: int = 336, swap: bool = False):
    """A synthetic photo: a red square and a blue circle on a pale table under a grey wall
    (``swap`` trades their places, for patching one picture into the other)."""
    from PIL import Image, ImageDraw

    picture = Image.new("RGB", (width, height))
    draw = ImageDraw.Draw(picture)
    horizon = int(height * 0.42)
    for y in range(height):
        shade = 150 + 40 * y // horizon if y < horizon else 235 - 30 * (y - horizon) // (height - horizon)
        draw.line((0, y, width, y), fill=(shade, shade, shade - 6 if y < horizon else shade - 25))
    left, right = (0.16, 0.58) if not swap else (0.58, 0.16)
    side = 0.26 * width
    draw.rectangle((left * width, 0.45 * height, left * width + side, 0.45 * height + side), fill=(205, 30, 35))
    draw.ellipse((right * width, 0.45 * height, right * width + side, 0.45 * height + side), fill=(35, 70, 200))
    return picture


def write_pictures(model, out: str | Path) -> list[Path]:
    """Draw what each analysis helper finds on `scene` into ``out``; returns the files.

    The pictures of docs/seeing-into-the-image.md are these, for the default checkpoint."""
    from . import analysis
    from .pictures import overlay, overlay_grid

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    image, swapped = scene(), scene(swap=True)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    layers = [f"layer {i}" for i in range(model.num_layers)]
    pictures = {}

    lens = analysis.logit_lens(model, prompt, [image])
    pictures["logit-lens.png"] = overlay_grid(
        image, lens.geometry[0], lens.top_probabilities[0][..., 0], titles=layers, scale=0.5
    )
    ablation = analysis.occlusion(model, prompt, [image])
    pictures["occlusion.png"] = overlay(image, ablation.geometry[0], ablation.scores, title="logit drop")
    patching = analysis.patch_image(model, prompt, [image], [swapped], per_token=True)
    pictures["patching.png"] = overlay_grid(image, patching.geometry[0], patching.effects, titles=layers, scale=0.5)
    attention = analysis.attention_to_images(model, prompt, [image])
    pictures["attention.png"] = overlay_grid(
        image, attention.geometry[0], attention.weights[0].mean(1), titles=layers, scale=0.5
    )
    tower = analysis.tower_patterns(model, prompt, [image], layer=-1)
    geometry, grid = tower.geometry[0], tower.grids[0]
    square = geometry.token_at(100, 170, grid=grid)  # over the red square
    heads = tower.patterns[0][:, square]
    pictures["tower.png"] = overlay_grid(
        image, geometry, heads, grid=grid, titles=[f"head {h}" for h in range(len(heads))], scale=0.5
    )
    written = []
    for name, picture in pictures.items():
        picture.save(out / name, optimize=True)
        written.append(out / name)
    return written


def format_support(rows: dict[str, str | None]) -> str:
    """``model.support()`` as a two-column table."""
    width = max(map(len, rows), default=0)
    return "\n".join(f"  {row:<{width}}  {'yes' if reason is None else 'no: ' + reason}" for row, reason in rows.items())


def run(checkpoint: str = "qwen2_vl", out_dir: str | Path | None = None) -> None:
    from . import StandardizedTransformer
    from .testing import build

    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    path = build(checkpoint)
    print(f"checkpoint: a random-weight {checkpoint!r} checkpoint written to {path}")
    model = StandardizedTransformer(
        str(path), task="image-text-to-text", dispatch=True, attn_implementation="eager", device="cpu"
    )
    print(f"family: {model.family!r}")
    print(f"aliases: {model._aliases}")
    print(
        f"text: {model.num_layers} layers, {model.hidden_size} wide, {model.num_heads} heads over "
        f"{model.num_kv_heads} KV heads of {model.head_dim}; vision: {model.vision.num_layers} layers, "
        f"{model.vision.vision_hidden_size} wide, patch {model.vision.patch_size}"
    )

    image = picture()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is in this image?"}]}]
    prompt = model.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    print(f"prompt: {prompt!r} with one {image.width} x {image.height} image")
    last = model.num_layers - 1
    with model.trace(prompt, images=[image]):
        mask = model.vision.image_token_mask.save()
        patches = model.vision.patch_embeddings.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
        x = model.layers[last].input.save()
        pattern = model.layers[last].self_attn.attention_probabilities.save()
        attn = model.layers[last].self_attn.attention_output.save()
        mlp = model.layers[last].mlp.mlp_output.save()
        out = model.layers[last].layer_output.save()
        logits = model.logits.save()
    with model.trace(prompt, images=[image]):
        model.vision.image_features[:] = 0
        ablated = model.logits.save()

    print(f"read: image_token_mask {tuple(mask.shape)} with {int(mask.sum())} image tokens")
    print(f"      vision.patch_embeddings {tuple(patches.shape)}, image_features {tuple(features.shape)}")
    print(f"      layers[0].input[image_token_mask] == image_features: {torch.equal(first[mask], features)}")
    identity = torch.allclose(x + attn + mlp, out, atol=1e-5)
    print(f"      layers[{last}]: input + attention_output + mlp_output == layer_output: {identity}")
    print(f"      layers[{last}] attention pattern {tuple(pattern.shape)}, rows sum to {pattern.sum(-1).mean():.4f}")
    top = logits[0, -1].topk(3)
    tokens = model.tokenizer.convert_ids_to_tokens(top.indices.tolist())
    print(f"      next-token logits {tuple(logits.shape)}; top 3: {tokens} at {[round(v, 3) for v in top.values.tolist()]}")
    print(f"edit: zeroing image_features moves the last logits by {(ablated - logits)[0, -1].abs().max():.4f}")
    print("model.support():")
    print(format_support(model.support()))
    if out_dir is not None:
        written = write_pictures(model, out_dir)
        print(f"pictures: {len(written)} overlays of the helpers' scores on the image, in {Path(out_dir).resolve()}:")
        for path in written:
            print(f"  {path.name}")
