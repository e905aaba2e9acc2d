"""The chat templates of the tiny LLaVA checkpoints (`checkpoints`), each in the prompt
format of the hub checkpoints its shape stands for."""

#: llava-interleave's format (Qwen's im_start turns): a turn's images first, then each
#: of its texts on a line of its own.
INTERLEAVE_TEMPLATE = (
    "{% for turn in messages %}"
    "<|im_start|>{{ turn['role'] }}\n"
    "{% if turn['content'] is string %}{{ '\\n' ~ turn['content'] }}{% else %}"
    "{% for part in turn['content'] if part['type'] == 'image' %}<image>{% endfor %}"
    "{% for part in turn['content'] if part['type'] == 'text' %}{{ '\\n' ~ part['text'] }}{% endfor %}"
    "{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

#: Sets ``texts`` to a turn's texts, whether its content is a string or a list of parts.
_TEXTS = (
    "{% if turn['content'] is string %}{% set texts = [turn['content']] %}"
    "{% else %}{% set texts = turn['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | list %}"
    "{% endif %}"
)

#: Each image part of a turn as "<image>" on a line of its own.
_IMAGE_LINES = (
    "{% if turn['content'] is not string %}"
    "{% for part in turn['content'] if part['type'] == 'image' %}<image>\n{% endfor %}{% endif %}"
)

#: LLaVA-1.5's format: "USER: <image>\n<text> ASSISTANT: <answer></s>", a system turn's
#: text with no role before it.
LLAVA_1_5_TEMPLATE = (
    "{{ bos_token }}{% for turn in messages %}" + _TEXTS
    + "{% if turn['role'] != 'system' %}{{ turn['role'] | upper }}: {% endif %}" + _IMAGE_LINES
    + "{{ texts | join(' ') }}{% if turn['role'] == 'assistant' %}{{ eos_token }}{% else %} {% endif %}"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)

#: LLaVA-NeXT on Mistral's format: "[INST] <image>\n<text> [/INST] <answer></s>", a system
#: turn's text opening the next user turn.
LLAVA_NEXT_TEMPLATE = (
    "{{ bos_token }}{% set held = namespace(system='') %}{% for turn in messages %}" + _TEXTS
    + "{% if turn['role'] == 'system' %}{% set held.system = texts | join(' ') ~ '\\n\\n' %}"
    "{% elif turn['role'] == 'user' %}[INST] {{ held.system }}{% set held.system = '' %}" + _IMAGE_LINES
    + "{{ texts | join(' ') }} [/INST]"
    "{% else %} {{ texts | join(' ') }}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)

#: LLaVA-OneVision's format (Qwen's turns, the role and a space, no newline after a
#: turn's end): a turn's images, its videos, then each text on a line of its own.
ONEVISION_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' '}}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>' }}{% endfor %}"
    "{% if message['role'] != 'assistant' %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}{{ '\\n' + content['text'] }}{% endfor %}"
    "{% else %}{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% generation %}{{ '\\n' + content['text'] }}{% endgeneration %}{% endfor %}{% endif %}"
    "{{'<|im_end|>'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

#: VipLLaVA's format: a fixed system line (a system turn's text replaces it), then each
#: turn as "###Human: " or "###Assistant: ", a turn's images each "<image>" on a line of its
#: own before its text; "###Assistant:" to answer.
VIPLLAVA_SYSTEM = ("A chat between a curious human and an artificial intelligence assistant. "
                   "The assistant gives helpful, detailed, and polite answers to the human's questions.")

VIPLLAVA_TEMPLATE = (
    "{{ bos_token }}{% set system = namespace(text='" + VIPLLAVA_SYSTEM.replace("'", "\\'") + "') %}"
    "{% for turn in messages if turn['role'] == 'system' %}" + _TEXTS + "{% set system.text = texts | join(' ') %}"
    "{% endfor %}{{ system.text }}{% for turn in messages if turn['role'] != 'system' %}" + _TEXTS
    + "{{ '###Human: ' if turn['role'] == 'user' else '###Assistant: ' }}" + _IMAGE_LINES
    + "{{ texts | join(' ') }}{% endfor %}{% if add_generation_prompt %}###Assistant:{% endif %}"
)

#: Pixtral-12B's format: "<s>[INST]" + the user's parts in order ("[IMG]" where an image
#: goes) + "[/INST]", the assistant's reply + "</s>"; a system turn's text opens the next
#: user turn, followed by a blank line.
PIXTRAL_TEMPLATE = (
    "{{ bos_token }}{% set held = namespace(system='') %}{% for turn in messages %}"
    "{% if turn['content'] is string %}{% set parts = [{'type': 'text', 'text': turn['content']}] %}"
    "{% else %}{% set parts = turn['content'] %}{% endif %}"
    "{% if turn['role'] == 'system' %}"
    "{% set held.system = parts | selectattr('type', 'equalto', 'text') | map(attribute='text') | join(' ') ~ '\\n\\n' %}"
    "{% elif turn['role'] == 'user' %}[INST]{{ held.system }}{% set held.system = '' %}"
    "{% for part in parts %}{% if part['type'] == 'image' %}[IMG]{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}[/INST]"
    "{% else %}{% for part in parts if part['type'] == 'text' %}{{ part['text'] }}{% endfor %}{{ eos_token }}{% endif %}"
    "{% endfor %}"
)

#: Vicuna's format as the LLaVA video lines use it: a system turn's text as it is, then each
#: turn "ROLE: " with its images and videos one a line, then its texts each followed by a
#: space (the assistant's marked for generation), and "ASSISTANT:" to answer.
VICUNA_VIDEO_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ message['content'][0]['text'] + ' ' }}"
    "{% else %}{{ message['role'].upper() + ': ' }}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'image') %}{{ '<image>\\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'video') %}{{ '<video>\\n' }}{% endfor %}"
    "{% for content in message['content'] | selectattr('type', 'equalto', 'text') %}"
    "{% if message['role'] == 'assistant' %}{% generation %}{{ content['text'] + ' ' }}{% endgeneration %}"
    "{% else %}{{ content['text'] + ' ' }}{% endif %}{% endfor %}"
    "{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)
