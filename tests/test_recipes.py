"""`vlreg.testing.tiny` and `vlreg.testing.chat_template`: what most families' tiny builders
share, said once. Every family built with them is checked by its own conformance suite; here,
what a builder author relies on: where the special ids land, and the prompts a template writes."""

import json

from vlreg.testing import chat_template, tiny

CHATML = chat_template("<|im_start|>{role}\n", "<|im_end|>\n", "<image>\n", "<video>\n")


def render(template, messages, **options):
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(template).render(messages=messages, bos_token="<s>", **options)


def test_a_chat_template_writes_each_turn_its_parts_in_order_and_the_generation_prompt():
    messages = [{"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "image"}, {"type": "video"},
                                             {"type": "text", "text": "B"}]},
                {"role": "assistant", "content": "C"}]
    assert render(CHATML, messages, add_generation_prompt=True) == (
        "<|im_start|>user\nA<image>\n<video>\nB<|im_end|>\n<|im_start|>assistant\nC<|im_end|>\n<|im_start|>assistant\n")
    quoted = chat_template("[{role}]'", "'\n", "<it's>", bos=True)  # quotes and line breaks survive as written
    assert render(quoted, [{"role": "user", "content": [{"type": "image"}]}]) == "<s>[user]'<it's>'\n"


def test_tiny_puts_the_special_ids_in_the_text_config_and_where_asked_at_the_root(tmp_path):
    from transformers import CLIPImageProcessor, LlavaConfig, LlavaProcessor

    tokens = ("<pad>", "<s>", "</s>", "<|im_end|>", "<image>")
    folder = tiny(
        tmp_path / "tiny", LlavaConfig,
        lambda tok: LlavaProcessor(image_processor=CLIPImageProcessor(), tokenizer=tok, patch_size=14,
                                   chat_template=CHATML),
        tokens=tokens, roles={"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>"},
        stops={"pad_token": "<pad>", "eos_token": "<|im_end|>"},  # stops at another token than the tokenizer's end
        text={"model_type": "qwen2", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
              "num_attention_heads": 2, "num_key_value_heads": 1},
        vision={"model_type": "clip_vision_model", "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                "num_attention_heads": 2, "image_size": 28, "patch_size": 14},
        ids={"image_token_index": "<image>"}, special_at_root=True,
        overrides={"text_config": {"num_hidden_layers": 2}, "projector_hidden_act": "relu"},
    )
    config = json.loads((folder / "config.json").read_text())
    generation = json.loads((folder / "generation_config.json").read_text())
    ids = {token: index for index, token in enumerate(tokens)}  # the special tokens take the first ids, in order
    assert config["image_token_index"] == ids["<image>"] and config["projector_hidden_act"] == "relu"
    assert config["text_config"]["num_hidden_layers"] == 2 and config["text_config"]["vocab_size"] > len(tokens)
    assert (config["text_config"]["eos_token_id"], config["eos_token_id"], generation["eos_token_id"]) == (
        ids["<|im_end|>"],) * 3
    assert config["text_config"]["bos_token_id"] is None and "bos_token_id" not in generation
