"""The workloads of a study, beside their cheapest way in plain transformers.

* **Occlusion**: every image token's features replaced in turn (as copies of the prompt in
  batches), three ways: vlreg's `occlusion` (the tower run once, replayed), the same sweep
  with the tower run for every batch (vlreg before it cached the tower), and the floor, in
  plain transformers: the tower once, then the text model on embeddings with one token's
  features replaced per copy.
* **Cache everything**: every standard value of every block, text and tower, saved in one
  trace; against plain transformers with forward hooks keeping the same module outputs.
"""

from __future__ import annotations

import torch

from vlreg import analysis


def occlusion_vlreg(model, prompt, images, batch):
    return analysis.occlusion(model, prompt, images, batch=batch).scores


def occlusion_tower_every_batch(model, prompt, images, batch):
    """The sweep `occlusion` makes, with the tower recomputed for every batch."""
    (geometry,) = model.vision.geometry(prompt, images)
    drops = []
    for start in range(0, geometry.tokens, batch):
        tokens = list(range(start, min(geometry.tokens, start + batch)))
        copies = len(tokens) + 1
        with model.trace([prompt] * copies, images=[list(images)] * copies):
            features = model.vision.image_features
            mean = features[: geometry.tokens].mean(0)
            rows = torch.tensor([k * geometry.tokens + token for k, token in enumerate(tokens)])
            features[rows] = mean
            logits = model.logits[:, -1].save()
        wanted = int(logits[-1].argmax())
        drops.append(logits[-1, wanted] - logits[:-1, wanted])
    return torch.cat(drops)


def occlusion_floor(module, encoding, batch):
    """Plain transformers' least work for the sweep: the tower once, then the text model
    on the prompt's embeddings with one image token replaced by the mean per copy."""
    inner = module.model
    ids = encoding["input_ids"]
    mask = ids == module.config.image_token_id
    embeddings = inner.get_input_embeddings()(ids)
    features = inner.get_image_features(encoding["pixel_values"], encoding["image_grid_thw"]).pooler_output
    features = torch.cat(list(features)) if isinstance(features, (list, tuple)) else features
    embeddings = embeddings.masked_scatter(mask[..., None], features)
    positions, _ = inner.get_rope_index(ids, image_grid_thw=encoding["image_grid_thw"],
                                        attention_mask=encoding["attention_mask"],
                                        mm_token_type_ids=encoding["mm_token_type_ids"])
    where = mask[0].nonzero()[:, 0]
    mean = features.mean(0)
    drops = []
    for start in range(0, len(where), batch):
        tokens = where[start : start + batch]
        copies = embeddings.repeat(len(tokens) + 1, 1, 1)
        copies[torch.arange(len(tokens)), tokens] = mean
        logits = module(inputs_embeds=copies, position_ids=positions.repeat(1, len(tokens) + 1, 1),
                        attention_mask=encoding["attention_mask"].repeat(len(tokens) + 1, 1)).logits[:, -1]
        wanted = int(logits[-1].argmax())
        drops.append(logits[-1, wanted] - logits[:-1, wanted])
    return torch.cat(drops)


def everything_vlreg(model, inputs):
    """Every block's stream in and out and what its attention and MLP add, text and tower,
    the patch and token embeddings, the features and the logits: the values a forward hook
    can also keep, by their standard names, in one trace."""
    saved = []
    with model.trace(inputs):
        saved.append(model.token_embeddings.save())
        saved.append(model.vision.patch_embeddings.save())
        for block in [*model.vision.layers, *model.layers]:
            if block is model.layers[0]:
                saved.append(model.vision.image_features.save())
            saved += [block.input.save(), block.self_attn.attention_output.save(), block.mlp.mlp_output.save(),
                      block.layer_output.save()]
        saved.append(model.logits.save())
    return saved


def everything_hooks(module, inputs):
    """The same tensors kept by forward hooks (and pre-hooks for the blocks' inputs)."""
    inner = module.model
    tower, text = inner.visual, inner.language_model
    saved = []

    def keep(m, args, out=None):
        saved.append((args[0] if out is None else out[0] if isinstance(out, tuple) else out))

    handles = [text.embed_tokens.register_forward_hook(keep), tower.patch_embed.register_forward_hook(keep),
               tower.merger.register_forward_hook(keep), module.lm_head.register_forward_hook(keep)]
    for block in [*tower.blocks, *text.layers]:
        attention = getattr(block, "attn", None) or block.self_attn
        handles += [block.register_forward_pre_hook(keep), attention.register_forward_hook(keep),
                    block.mlp.register_forward_hook(keep), block.register_forward_hook(keep)]
    try:
        module(**inputs)
    finally:
        for handle in handles:
            handle.remove()
    return saved
