"""``vlreg demo``: build a small checkpoint, trace an image prompt, print what was read."""

from __future__ import annotations

import torch


def picture(width: int = 112, height: int = 84):
    """A synthetic photo: a colour gradient with a red square in it."""
    from PIL import Image

    x = torch.linspace(0, 1, width).expand(height, width)
    y = torch.linspace(0, 1, height).unsqueeze(1).expand(height, width)
    pixels = torch.stack([x, y, 1 - x], -1)
    pixels[height // 4 : height // 2, width // 4 : width // 2] = torch.tensor([1.0, 0.0, 0.0])
    return Image.fromarray((pixels * 255).to(torch.uint8).numpy())


def format_support(rows: dict[str, str | None]) -> str:
    """``model.support()`` as a two-column table."""
    width = max(map(len, rows), default=0)
    return "\n".join(f"  {row:<{width}}  {'yes' if reason is None else 'no: ' + reason}" for row, reason in rows.items())


def run(checkpoint: str = "qwen2_vl") -> None:
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
