"""``vlreg demo``: load the toy model (a small Qwen2-VL trained to name the colour of one
shape in a scene, shipped with vlreg), trace a held-out scene, print what the model
answered and what vlreg's helpers found, and with ``--out`` draw it onto the scene: the
pictures of docs/seeing-into-the-image.md, and of docs/videos.md (a video of the scene). Nothing is trained or cached, and the output
is the same on every run; progress goes to stderr."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

#: Pictures are drawn at this many times the toy's 168 x 168 scenes, so labels stay readable.
ZOOM = 3


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


def demo_scene():
    """The demo's scene: the first held-out toy scene whose asked shape lies clear of the
    top row and the right column, where a picture's title and colour bar are drawn."""
    from .testing import toy

    return next(s for s in toy.scenes(50) if s.target_box[1] >= 2 * toy.CELL and s.target_box[2] <= toy.SIDE - toy.CELL)


def demo_video(example) -> tuple[str, list]:
    """A video of the demo's scene and its prompt: two frames of the scene (one temporal
    patch), then two of the scene with the asked shape's colour swapped for another
    shape's (the swap `findings` patches from), the question asked about the video."""
    from jinja2 import Template

    from .testing.toy_scenes import CHAT_TEMPLATE

    other = sorted(set(example.shapes) - {example.shape})[0]
    swapped = example.recoloured(example.shapes[other][0])
    messages = [{"role": "user", "content": [{"type": "text", "text": question(example)}, {"type": "video"}]}]
    prompt = Template(CHAT_TEMPLATE).render(messages=messages, add_generation_prompt=True)
    return prompt, [example.image, example.image, swapped.image, swapped.image]


def progress(text: str) -> None:
    """One line on stderr, so the findings on stdout stay the same on every run."""
    print(f"... {text}", file=sys.stderr, flush=True)


def covering(geometry, box) -> list[int]:
    """The image tokens whose boxes overlap ``box`` ``(x0, y0, x1, y1)``."""
    x0, y0, x1, y1 = box
    b = geometry.boxes
    return ((b[:, 0] < x1) & (x0 < b[:, 2]) & (b[:, 1] < y1) & (y0 < b[:, 3])).nonzero()[:, 0].tolist()


def question(example) -> str:
    return f"What color is the {example.shape}?"


def findings(model, example) -> dict:
    """What each helper finds on one toy scene: the answer, the occlusion's top token, the
    answer with the target's token (and with a token away from every shape) mean-ablated,
    the answer when the target's tokens are patched, block by block, from the scene with
    the target's colour swapped for another shape's, the last token's attention share on
    the target and the logit lens's probability of the answer there, per block, and the
    maps of the trained dictionary's (`vlreg.testing.dictionary`) four features most
    active at the target."""
    from . import analysis
    from .dictionaries import feature_maps
    from .testing import dictionary as trained_dictionary

    prompt, image = example.prompt, example.image
    (geometry,) = model.vision.geometry(prompt, [image])
    target = covering(geometry, example.target_box)
    with torch.no_grad(), model.trace(prompt, images=[image]):
        logits = model.logits[0, -1].save()
    probabilities = logits.float().softmax(-1)
    answer = model.tokenizer.decode(int(probabilities.argmax()))
    word = lambda token: model.tokenizer.decode(int(token))  # noqa: E731

    progress(f"occlusion: mean-ablating each of the {geometry.tokens} image tokens")
    occluded = analysis.occlusion(model, prompt, [image], target=answer, batch=geometry.tokens)
    near = set(covering(geometry, tuple(v + d for v, d in zip(example.target_box, (-28, -28, 28, 28)))))
    for _, box in example.shapes.values():
        near |= set(covering(geometry, box))
    far = [t for t in range(geometry.tokens) if t not in near][: len(target)]
    progress("ablation: the asked shape's token, then a token away from every shape")
    ablated = {where: word(analysis.ablate_image(model, prompt, [image], mode="mean", tokens=tokens).ablated.argmax())
               for where, tokens in (("target", target), ("away", far))}

    other = sorted(set(example.shapes) - {example.shape})[0]
    colour = example.shapes[other][0]
    swapped = example.recoloured(colour)
    progress(f"patching from the scene where the {example.shape} is {colour}: its token, then each token, block by block")
    patched = analysis.patch_image(model, prompt, [image], [swapped.image], target=colour, tokens=target)
    per_token = analysis.patch_image(model, prompt, [image], [swapped.image], target=colour, per_token=True,
                                     batch=geometry.tokens)
    progress("attention from the last token, and the logit lens")
    seen = analysis.attention_to_images(model, prompt, [image]).weights[0].mean(1)
    lens = analysis.logit_lens(model, prompt, [image], target=answer)
    progress("the toy dictionary's features at the image tokens")
    dictionary = trained_dictionary.load(model)
    maps = feature_maps(dictionary, prompt, [image])
    return {
        "geometry": geometry, "target": target, "answer": answer, "probability": float(probabilities.max()),
        "occlusion": occluded.scores, "ablated": ablated, "away": far,
        "swap": (other, colour, swapped), "patched": [word(t) for t in patched.patched.argmax(-1)],
        "patch_effects": patched.effects, "patch_per_token": per_token.effects,
        "attention": seen, "attention_share": seen[:, target].sum(-1) / seen.sum(-1),
        "lens": lens.target_probabilities[0],
        "dictionary": dictionary, "maps": maps, "features": maps.top(4, tokens=target),
    }


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def summary(example, found: dict) -> list[str]:
    """The findings as sentences."""
    target, scores = found["target"], found["occlusion"]
    top = scores.topk(len(target)).indices.tolist()
    other, colour, _ = found["swap"]
    blocks = ", ".join
    return [
        f"scene: {', '.join(f'{_article(c)} {c} {s}' for s, (c, _) in example.shapes.items())}; "
        f"{question(example)!r} (the {example.shape} is in image token {target[0]} of {found['geometry'].tokens})",
        f"answer: {found['answer']!r} (p {found['probability']:.2f}); the truth: {example.answer!r}",
        f"occlusion: the token whose mean-ablation drops the {found['answer']!r} logit most is {top[0]} "
        f"({scores[top[0]]:.2f}; the next {scores.sort(descending=True).values[len(target)]:.2f}): "
        f"{'on' if set(top) <= set(target) else 'not on'} the {example.shape}",
        f"ablation: mean-ablating the {example.shape}'s token, the model answers {found['ablated']['target']!r}; "
        f"ablating token {found['away'][0]}, away from every shape, {found['ablated']['away']!r}",
        f"patching the {example.shape}'s token from the scene where it is {colour} (the {other}'s colour): the answer "
        f"per block {found['patched']}; effect on the {colour!r} logit {blocks(f'{e:.2f}' for e in found['patch_effects'])}",
        f"attention: the last token's share of its image attention on the {example.shape}'s token, per block: "
        f"{blocks(f'{s:.2f}' for s in found['attention_share'])} (chance {len(target) / found['geometry'].tokens:.2f})",
        f"logit lens: p({found['answer']!r}) at the {example.shape}'s token per block: "
        f"{blocks(f'{p:.2f}' for p in found['lens'][:, target].mean(-1))}, elsewhere at most "
        f"{blocks(f'{p:.2f}' for p in found['lens'][:, [t for t in range(len(scores)) if t not in target]].max(-1).values)}",
        f"dictionary on {found['dictionary'].site} ({found['dictionary'].features} features): the most active at the "
        f"{example.shape}'s token {blocks(f'{f} ({a:.1f})' for f, a in found['features'])}; feature "
        f"{found['features'][0][0]} is strongest at token {int(found['maps'].map(found['features'][0][0]).argmax())}",
    ]


def write_pictures(model, out: str | Path, example=None, found: dict | None = None) -> list[Path]:
    """Draw what each helper finds on a toy scene into ``out``; returns the files.

    The pictures of docs/seeing-into-the-image.md are these."""
    from . import analysis
    from .pictures import caption, overlay, overlay_grid

    example = demo_scene() if example is None else example
    found = findings(model, example) if found is None else found
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress("the tower's attention, and drawing the pictures")
    image, geometry, shape, answer = example.image, found["geometry"], example.shape, found["answer"]
    about = caption(model, question(example))
    blocks = [f"block {i}" for i in range(model.num_layers)]
    _, colour, _ = found["swap"]
    last = model.vision.num_layers - 1
    tower = analysis.tower_patterns(model, example.prompt, [image], layer=last)
    heads = tower.patterns[0][:, found["target"][0]]
    features = [f for f, _ in found["features"]]
    grid = {"zoom": ZOOM, "scale": 0.5, "caption": about}
    pictures = {
        "occlusion.png": overlay(image, geometry, found["occlusion"], zoom=ZOOM, caption=about,
                                 title=f"occlusion: the {answer!r} logit's drop with each token mean-ablated",
                                 label="drop of the logit (logits)"),
        "logit-lens.png": overlay_grid(image, geometry, found["lens"], titles=blocks, **grid,
                                       title=f"logit lens: p({answer!r}) at each image token, after each block",
                                       label=f"p({answer!r}) (probability)"),
        "patching.png": overlay_grid(image, geometry, found["patch_per_token"], titles=blocks, **grid,
                                     title=f"patching each token from the scene where the {shape} is {colour}",
                                     label=f"change of the {colour!r} logit (logits)"),
        "attention.png": overlay_grid(image, geometry, found["attention"], titles=blocks, **grid,
                                      title="attention from the last token to each image token, mean over heads",
                                      label="attention weight (fraction)"),
        "tower.png": overlay_grid(image, geometry, heads, grid=tower.grids[0], mark=found["target"][0], **grid,
                                  titles=[f"head {h}" for h in range(len(heads))],
                                  title=f"tower block {last}: attention from the {shape}'s token (outlined), per head",
                                  label="attention weight (fraction)"),
        "dictionary.png": overlay_grid(image, geometry, [found["maps"].map(f) for f in features], low=0.0, **grid,
                                       titles=[f"feature {f}" for f in features],
                                       title=f"the dictionary's {len(features)} features most active at the {shape}",
                                       label="activation (arbitrary units)"),
    }
    pictures.update(video_pictures(model, example))
    written = []
    for name, picture in pictures.items():
        picture.save(out / name, optimize=True)
        written.append(out / name)
    return written


def video_pictures(model, example) -> dict:
    """A score over `demo_video`'s frames (the pictures of docs/videos.md): each video
    token's occlusion as a strip of the frames, and each temporal patch's as bars under them."""
    from . import analysis
    from .pictures import caption
    from .strips import frame_strip, strip

    prompt, video = demo_video(example)
    progress("the video: occluding each of its tokens, then each temporal patch")
    uncapped = {"cap_pixels_per_frame": False}  # transformers' present default, said so: it warns otherwise
    tokens = analysis.occlude_video_tokens(model, prompt, video, batch=36, **uncapped)
    patches = analysis.occlude_frames(model, prompt, video, **uncapped)
    answer = model.tokenizer.decode(tokens.target)
    about = {"zoom": ZOOM, "scale": 0.5, "caption": caption(model, question(example)),
             "label": "drop of the logit (logits)"}
    return {
        "video-occlusion.png": strip(video, tokens.geometry, tokens.scores, **about,
                                     title=f"occlusion over a video: the {answer!r} logit's drop with each token mean-ablated"),
        "video-frames.png": frame_strip(video, patches.geometry, patches.scores, **about,
                                        title=f"the {answer!r} logit's drop with each temporal patch's features zeroed"),
    }


def format_support(rows: dict[str, str | None]) -> str:
    """``model.support()`` as a two-column table."""
    width = max(map(len, rows), default=0)
    return "\n".join(f"  {row:<{width}}  {'yes' if reason is None else 'no: ' + reason}" for row, reason in rows.items())


def run(out_dir: str | Path | None = None) -> None:
    from transformers.utils import logging as transformers_logging

    from . import StandardizedTransformer
    from .testing import toy

    transformers_logging.disable_progress_bar()
    progress("loading the toy model")
    path = toy.build()
    report = toy.shipped_report()
    model = StandardizedTransformer(str(path), task="image-text-to-text", dispatch=True,
                                    attn_implementation="eager", device="cpu")
    print(f"checkpoint: the toy model shipped with vlreg, in {path} (recipe {report['key']}, trained in "
          f"{report['train_seconds']:.0f} s on {report['threads']} thread{'s' * (report['threads'] != 1)}, held-out accuracy "
          f"{report['held_out_accuracy']:.0%})")
    print(f"family: {model.family!r}")
    print(
        f"text: {model.num_layers} layers, {model.hidden_size} wide, {model.num_heads} heads over "
        f"{model.num_kv_heads} KV heads of {model.head_dim}; vision: {model.vision.num_layers} layers, "
        f"{model.vision.vision_hidden_size} wide, patch {model.vision.patch_size}"
    )
    example = demo_scene()
    last = model.num_layers - 1
    with torch.no_grad(), model.trace(example.prompt, images=[example.image]):
        mask = model.vision.image_token_mask.save()
        features = model.vision.image_features.save()
        first = model.layers[0].input.save()
        x = model.layers[last].input.save()
        attn = model.layers[last].self_attn.attention_output.save()
        mlp = model.layers[last].mlp.mlp_output.save()
        out = model.layers[last].layer_output.save()
    print(f"prompt: {example.prompt!r} with one {example.image.width} x {example.image.height} image")
    print(f"read: image_token_mask {tuple(mask.shape)} with {int(mask.sum())} image tokens; "
          f"image_features {tuple(features.shape)}")
    print(f"      layers[0].input[image_token_mask] == image_features: {torch.equal(first[mask], features)}")
    identity = torch.allclose(x + attn + mlp, out, atol=1e-5)
    print(f"      layers[{last}]: input + attention_output + mlp_output == layer_output: {identity}")
    found = findings(model, example)
    print("found:")
    for line in summary(example, found):
        print(f"  {line}")
    print("model.support():")
    print(format_support(model.support()))
    if out_dir is not None:
        written = write_pictures(model, out_dir, example, found)
        print(f"pictures: {len(written)} overlays of the helpers' scores on the scene and a video of it, in "
              f"{Path(out_dir).resolve()} (docs/seeing-into-the-image.md and docs/videos.md show them):")
        for path in written:
            print(f"  {path.name}")
