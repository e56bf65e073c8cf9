"""Chat templates of tool-trained models' two call conventions, written for tests: ChatML turns
with Hermes-style `<tools>` and `<tool_call>` blocks (the convention of Qwen 2.5 and Hermes), and
Llama 3.1-style bare JSON calls with a "parameters" key. Both follow HF's template variables:
`tools` in OpenAI's shape, `message.tool_calls` with parsed arguments, "tool" turns."""

from __future__ import annotations

HERMES_TEMPLATE = """\
{%- if tools %}
<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}

{% endif %}You may call one or more functions. The function signatures are within <tools></tools>:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
For each call, return a JSON object with the function name and arguments within \
<tool_call></tool_call> tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' %}{# written above #}
{%- elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant
{% if message.content %}{{ message.content }}
{% endif %}
{%- for call in message.tool_calls %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% if not loop.last %}
{% endif %}{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

LLAMA3_TEMPLATE = """\
{%- for message in messages %}<|im_start|>{{ message.role }}
{% if loop.first and tools %}Given the following functions, respond with a JSON for a function \
call with its proper arguments that best answers the given prompt. Respond in the format \
{"name": function name, "parameters": dictionary of argument name and its value}.
{% for tool in tools %}{{ tool | tojson(indent=4) }}
{% endfor %}{% endif %}
{%- if message.tool_calls %}{% for call in message.tool_calls %}\
{"name": "{{ call.function.name }}", "parameters": {{ call.function.arguments | tojson }}}\
{% endfor %}{% else %}{{ message.content }}{% endif %}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""
