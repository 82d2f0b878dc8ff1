#!/usr/bin/env python3
"""Writes cases.inc: Jinja snippets with the text Python's jinja2 renders.

Each case is a template, its variables (JSON) and what Python's jinja2,
set up as Hugging Face transformers sets it up (chat_template_jinja.py's
transformers_env), renders, or the message of the error it raises. The
expectations come from Python, never from Kiln; test_jinja_render.cpp
checks Kiln against them. Rerun after editing CASES:

  python3 tests/models/jinja/make_cases.py
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from chat_template_jinja import transformers_env  # noqa: E402

MSGS = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi \u00e9\u6771"},
        {"role": "assistant", "content": "Hello", "tool_calls": [
            {"id": "c1", "function": {"name": "f", "arguments": {"x": 1.5, "y": [1, "a"], "z": None}}}]}]
D = {"b": 2, "a": 1, "C": 3}

CASES = {
    "whitespace": [
        ("a\n{% if true %}\nb\n{% endif %}\nc", {}),
        ("  {% if true %}x{% endif %}  \n", {}),
        ("  {%- if true -%}  x  {%- endif -%}  ", {}),
        ("a  {{- 'b' -}}  c", {}),
        ("  {%+ if true %}x{% endif %}", {}),
        ("{% if true +%}\nx{% endif %}", {}),
        ("{# comment #}\nx", {}),
        ("  {# indented comment #}\nx\n  {#- stripped -#}  y", {}),
        ("line1\n  {%- set a = 1 %}\nline2\n", {}),
        ("x\n\n", {}),
        ("a\r\nb\rc", {}),
        ("{% raw %}{{ not }}{% if %}{% endraw %}", {}),
        ("{%- for m in messages %}\n  {{ m.role }}\n{% endfor %}", {"messages": MSGS}),
        ("{{ 'a' }}\n{{ 'b' }}\n", {}),
        ("\t{% if true %}\n\tx\n\t{% endif %}\n", {}),
        ("{% for i in range(2) %}  {{ i }}  {% endfor %}", {}),
    ],
    "statements": [
        ("{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %}", {"x": 2}),
        ("{% if x %}yes{% else %}no{% endif %}", {"x": []}),
        ("{% for x in xs %}{{ x }}{% else %}empty{% endfor %}", {"xs": []}),
        ("{% for k in d %}{{ k }}{% endfor %}", {"d": D}),
        ("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", {"d": D}),
        ("{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}", {"d": D}),
        ("{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
         "{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {"xs": ["a", "b", "c"]}),
        ("{% for x in xs %}{{ loop.previtem is defined }}{{ loop.previtem }}-{{ loop.nextitem }};{% endfor %}",
         {"xs": [1, 2, 3]}),
        ("{% for x in xs %}{{ loop.cycle('odd', 'even') }} {% endfor %}", {"xs": [1, 2, 3]}),
        ("{% for x in xs if x > 1 %}{{ x }}:{{ loop.index }}/{{ loop.length }} {% endfor %}", {"xs": [1, 2, 3, 0, 5]}),
        ("{% for x in xs %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}"
         "{% endfor %}", {"xs": [0, 1, 2, 3, 4]}),
        ("{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|"
         "{% endfor %}", {}),
        ("{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }} {% endfor %}", {}),
        ("{% for c in 'h\u00e9\u6771' %}[{{ c }}]{% endfor %}", {}),
        ("{% for x in undefined_thing %}x{% else %}none{% endfor %}", {}),
        ("{% set x = 1 %}{% for i in [1] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", {}),
        ("{% for i in [1, 2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]", {}),
        ("{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
        ("{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d) = ['x', 'y'] %}{{ c }}{{ d }}", {}),
        ("{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}"
         "{% endfor %}{{ ns.n }} {{ ns.s }}", {"xs": [1, 2, 3]}),
        ("{% set ns = namespace() %}{% set ns.found = false %}{{ ns.found }}{{ ns.missing is defined }}", {}),
        ("{% set x %}  block {{ 1 + 1 }}  {% endset %}[{{ x }}]", {}),
        ("{% set x | upper | trim %}  shout  {% endset %}[{{ x }}]", {}),
        ("{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}"
         "{{ greet('Ann') }} {{ greet('Bob', punct='?') }} {{ greet(greeting='Hi', name='Cy') }}", {}),
        ("{% macro m(a) %}[{{ a }}|{{ varargs }}|{{ kwargs }}]{% endmacro %}{{ m(1, 2, 3, k=4) }}{{ m() }}", {}),
        ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}"
         "{{ fact(6) }}", {}),
        ("{% set g = 'outer' %}{% macro show() %}{{ g }}{% endmacro %}{% set g = 'later' %}{{ show() }}", {}),
        ("{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}"
         "{% call wrap('b') %}bold {{ 1 + 2 }}{% endcall %}", {}),
        ("{% macro each(xs) %}{% for x in xs %}{{ caller(x, loop.index) }}{% endfor %}{% endmacro %}"
         "{% call(item, i) each(['a', 'b']) %}{{ i }}:{{ item }} {% endcall %}", {}),
        ("{% filter upper %}quiet {{ 'words' }}{% endfilter %}", {}),
        ("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
        ("{% generation %}assistant text {{ 1 }}{% endgeneration %}", {}),
        ("{% set xs = [3, 1, 2] %}{% for x in xs|sort %}{{ x }}{% endfor %}", {}),
    ],
    "expressions": [
        ("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}", {}),
        ("{{ 2 ** 10 }} {{ 2 ** -1 }} {{ 2 ** 3 ** 2 }} {{ 10 / 4 }} {{ 10 / 5 }} {{ 1 + 2.5 }} {{ -3 }} {{ +4 }}", {}),
        ("{{ 3 * 'ab' }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", {}),
        ("{{ 'a' ~ 1 ~ none ~ true ~ 2.0 ~ undefined_var }}", {}),
        ("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ [1, 2] < [1, 3] }}", {}),
        ("{{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 2 in (1, 2) }}", {}),
        ("{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or [] }} {{ not 0 }} {{ not not 'a' }}", {}),
        ("{{ 'yes' if x else 'no' }} [{{ 'only' if x }}] {{ 1 if false else 2 if true else 3 }}", {"x": 0}),
        ("{{ 'esc: \\n\\t\\\\ \\' \\\" \\u00e9 \\x41 \\101 \\q' }}", {}),
        ("{{ 'adjacent' \" strings\" }}", {}),
        ("{{ s[1:] }}|{{ s[:-1] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s[-2:] }}|{{ s[5:1:-1] }}|{{ s[100:] }}",
         {"s": "h\u00e9llo \u6771\u4eac"}),
        ("{{ xs[1:] }} {{ xs[::-1] }} {{ xs[-1] }} {{ xs[0] }} {{ xs.1 }} {{ t[1:] }}", {"xs": [1, 2, 3], "t": [4, 5]}),
        ("{{ {'a': 1, 'b': [1, 'x'], 3: none} }} {{ ['it\\'s', \"q\\\"\", 'tab\\t', '\u00e9'] }} {{ (1,) }} "
         "{{ (1, 'a') }} {{ () }}", {}),
        ("{{ none }} {{ true }} {{ false }} {{ 0.1 + 0.2 }} {{ 1e-05 }} {{ 1e16 }} {{ 1e15 }} {{ 1.0 }} {{ 3.0 / 2 }} "
         "{{ 1 / 3 }} {{ 123456789.0 * 1000 }} {{ -0.0 }} {{ 2.5e-7 }} {{ 0.0001 }}", {}),
        ("{{ d.a }} {{ d['b'] }} {{ d.get('C') }} {{ d.get('zz', 'dflt') }} {{ d.get('zz') }} {{ d.missing }}|", {"d": D}),
        ("{{ messages[2].tool_calls[0].function.arguments }} {{ messages[0]['content'] }}", {"messages": MSGS}),
        ("{{ 1_000 + 0x10 + 0o7 + 0b11 }} {{ 1.5e3 }} {{ 2E-2 }}", {}),
        ("{{ x.y is defined }} {{ x is defined }} {{ n is none }} {{ n is not none }}", {"n": None}),
        ("{{ (1 + 2) * 3 }} {{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ (-2) ** 2 }} {{ 10 - 2 - 3 }}", {}),
        ("{{ 'x' if none is none }} {{ [] is iterable }} {{ '' is string }}", {}),
        ("{{ xs|length > 1 and xs[0] == 'a' }}", {"xs": ["a", "b"]}),
        ("{{ 1, 2 }}", {}),
        ("{{ 'abc'.upper() ~ 'DEF'.lower() }}", {}),
    ],
    "filters": [
        ("[{{ '  a b  '|trim }}] [{{ 'xxaxx'|trim('x') }}] [{{ '\u3000\u00a0 wide \u3000'|trim }}] [{{ 42|trim }}]", {}),
        ("{{ 'h\u00e9llo w\u00f6rld'|upper }} {{ 'H\u00c9LLO'|lower }} {{ 'hELLO wORLD'|capitalize }} "
         "{{ 'hello-world foo(bar) x[y'|title }} {{ 'stra\u00dfe'|upper }}", {}),
        ("{{ 'abc'|length }} {{ 'h\u00e9\u6771'|length }} {{ [1, 2]|count }} {{ {'a': 1}|length }} {{ nothing|length }}", {}),
        ("{{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ 'xyz'|first }} {{ 'xyz'|last }} {{ {'k': 1}|first }} "
         "[{{ []|first }}]", {}),
        ("{{ [1, 2, 3]|join }} {{ [1, 'a', none]|join(', ') }} {{ users|join('/', attribute='name') }}",
         {"users": [{"name": "a"}, {"name": "b"}]}),
        ("{{ missing|default('dflt') }} {{ ''|default('e') }} {{ ''|default('e', true) }} {{ 0|d(5, boolean=true) }} "
         "{{ none|default('n') }} [{{ missing|default }}]", {}),
        ("{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(true) }} {{ d|dictsort(by='value') }}", {"d": D}),
        ("{{ d|items|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ 'ab'|list }} {{ d|list }}", {"d": D}),
        ("{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} "
         "{{ [3, 1, 2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='name')|list }}",
         {"users": [{"name": "x", "age": 30}, {"name": "y", "age": 20}, {"name": "z", "age": 30}]}),
        ("{{ [1, 2, 1, 'A', 'a']|unique|list }} {{ [1, 2, 3]|sum }} {{ users|sum(attribute='n') }} "
         "{{ [1, 5, 3]|min }} {{ [1, 5, 3]|max }} {{ ['b', 'A']|min }} {{ users|max(attribute='n') }}",
         {"users": [{"n": 1}, {"n": 4}]}),
        ("{{ ['a', 'b']|map('upper')|list }} {{ users|map(attribute='name')|join(',') }} "
         "{{ users|map(attribute='missing', default='?')|list }} {{ [1.6, 2.4]|map('round')|list }}",
         {"users": [{"name": "a"}, {"name": "b"}]}),
        ("{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')"
         "|map(attribute='role')|list }} {{ msgs|selectattr('tool_calls')|list|length }} "
         "{{ msgs|selectattr('tool_calls', 'defined')|map(attribute='role')|first }}", {"msgs": MSGS}),
        ("{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} "
         "{{ [0, 1, '', 'a']|select|list }} {{ [1, 5, 10]|select('gt', 4)|list }} {{ [1, 2]|select('in', [2])|list }}", {}),
        ("{{ 'a-b-c'|replace('-', '+') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'ab'|replace('', '.') }}", {}),
        ("{{ 'l1\\nl2\\n\\nl4'|indent }}|{{ 'l1\\nl2'|indent(2, true) }}|{{ 'l1\\n\\nl3'|indent(width='> ', blank=true) }}", {}),
        ("{{ '<b>x</b>'|safe }} {{ '<a href=\"x\">&\\'</a>'|e }} {{ '<a>'|escape }} {{ 3|string ~ 4 }} {{ [1]|string }}", {}),
        ("{{ -3|abs }} {{ (-3.5)|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }} "
         "{{ 3.14159|round(3, 'floor') }} {{ 3.14159|round(1, 'ceil') }} {{ 2.5|round|int }}", {}),
        ("{{ '42'|int }} {{ ' 7 '|int }} {{ '42.9'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.9|int }} {{ true|int }} "
         "{{ 'ff'|int(base=16) }} {{ '1_000'|int }}", {}),
        ("{{ '3.5'|float }} {{ 2|float }} {{ 'x'|float }} {{ '1e3'|float }} {{ 'x'|float(1.5) }}", {}),
        ("{{ 'abc'|reverse }} {{ [1, 2, 3]|reverse|list }} {{ 'h\u00e9\u6771'|reverse }}", {}),
        ("{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 'x')|list }}", {}),
        ("{{ 'one two  three'|wordcount }} {{ '<p>Hello <b>world</b> &amp; all</p>'|striptags }} "
         "{{ 'abc'|center(9) }}|", {}),
        ("{{ d|attr('a') }} {{ 'x'|attr('upper') is defined }}", {"d": D}),
    ],
    "tojson": [
        ("{{ v|tojson }}", {"v": {"s": "caf\u00e9 \u6771 \"q\" \\ \n\t\u0001\u007f", "i": 1, "f": 1.5, "g": 1e-05,
                                  "h": 1.0, "b": True, "n": None, "l": [], "d": {}, "big": 12345678901234}}),
        ("{{ v|tojson(indent=2) }}", {"v": {"a": [1, {"b": []}], "c": {}, "d": "x"}}),
        ("{{ v|tojson(indent=4) }}\n{{ [1, [2, 3]]|tojson(indent=1) }}", {"v": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
        ("{{ v|tojson(separators=(',', ':')) }} {{ v|tojson(sort_keys=true) }} {{ v|tojson(ensure_ascii=true) }}",
         {"v": {"z": "\u00e9\U0001F642", "a": [1, 2.25]}}),
        ("{{ {'x': 0.1, 'y': 100000000000000000000.0, 'z': -2.5e-8, 1: 'int key', true: 'b'}|tojson }}", {}),
        ("{{ 'plain'|tojson }} {{ 3|tojson }} {{ none|tojson }} {{ (1, 2)|tojson }} {{ v|tojson(indent='\\t') }}",
         {"v": [1]}),
    ],
    "tests": [
        ("{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 'a' is number }}|{{ 1 is integer }}{{ true is integer }}"
         "{{ 1.0 is integer }}|{{ 1.0 is float }}{{ 1 is float }}|{{ true is boolean }}{{ 1 is boolean }}", {}),
        ("{{ 'a' is string }}{{ 1 is string }}|{{ d is mapping }}{{ [] is mapping }}|{{ 'a' is iterable }}"
         "{{ [] is iterable }}{{ d is iterable }}{{ 1 is iterable }}{{ nope is iterable }}|{{ 'a' is sequence }}"
         "{{ d is sequence }}{{ 1 is sequence }}", {"d": D}),
        ("{{ none is none }}{{ 0 is none }}|{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}|"
         "{{ x is defined }}{{ x is undefined }}{{ d is defined }}", {"d": D}),
        ("{{ 3 is odd }}{{ 3 is even }}{{ 4 is even }}|{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}|"
         "{{ 2 is eq 2 }}{{ 2 is ne 2 }}{{ 1 is lt 2 }}{{ 1 is gt 2 }}{{ 2 is le 2 }}{{ 2 is ge 3 }}"
         "{{ 2 is equalto 2 }}{{ 2 is greaterthan 1 }}{{ 2 is lessthan 1 }}", {}),
        ("{{ 2 is in [1, 2] }}{{ 'x' is in 'abc' }}|{{ 'abc' is lower }}{{ 'aBc' is lower }}{{ 'ABC' is upper }}|"
         "{{ none is sameas none }}{{ true is sameas true }}|{{ range is callable }}{{ 1 is callable }}|"
         "{{ 'upper' is filter }}{{ 'nope' is filter }}{{ 'odd' is test }}", {}),
        ("{{ 1 is not string }} {{ x is not defined }} {{ [] is not mapping }}", {}),
    ],
    "methods": [
        ("[{{ s.strip() }}][{{ s.lstrip() }}][{{ s.rstrip() }}][{{ 'xxhixx'.strip('x') }}][{{ '\\n\\nab\\n'.lstrip('\\n') }}]",
         {"s": "  \u3000hi there\u00a0 "}),
        ("{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} "
         "{{ 'x</think>y</think>z'.split('</think>')[-1] }} {{ ''.split() }} {{ ''.split(',') }}", {}),
        ("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith(('x', 'lo')) }} {{ 'hello'.startswith('l', 2) }} "
         "{{ '\u6771\u4eac'.endswith('\u4eac') }}", {}),
        ("{{ 'hello world'.title() }} {{ '1st place'.title() }} {{ 'HELLO'.capitalize() }} {{ 'MiXeD'.swapcase() }}", {}),
        ("{{ 'aaa'.replace('a', 'b') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abc'.find('z') }} "
         "{{ 'abcabc'.count('bc') }} {{ 'h\u00e9llo'.find('l') }}", {}),
        ("{{ ', '.join(['a', 'b']) }} {{ 'l1\\nl2\\r\\nl3'.splitlines() }} {{ 'l1\\nl2'.splitlines(true) }}", {}),
        ("{{ '{} and {}'.format('a', 1) }} {{ '{0}{0}{name}'.format('x', name='y') }} {{ '{{}}'.format() }}", {}),
        ("{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'ab1'.isalnum() }} {{ ' \\t'.isspace() }} {{ ''.isdigit() }}", {}),
        ("{{ 'prefix-body'.removeprefix('prefix-') }} {{ 'a=b=c'.partition('=') }} {{ '7'.zfill(3) }} {{ 'x'.ljust(3) }}|", {}),
        ("{{ [1, 2, 2].count(2) }} {{ [1, 2, 3].index(3) }} {{ d.items()|list }}", {"d": {"k": "v"}}),
    ],
    "formatting": [
        ("{{ '%s-%d' % ('a', 3) }} {{ '%5.2f|%-4s|%04d|%x|%r|%%' % (3.14159, 'ab', 42, 255, 'q') }} "
         "{{ '%(a)s=%(b)d' % {'a': 'x', 'b': 2} }} {{ 'plain' % [] }} {{ '%.3s' % 'abcdef' }}", {}),
        ("{{ '%s'|format('y') }} {{ '%s and %s'|format(1, none) }} {{ '%e %g %+d % d' % (12345.678, 0.0001, 5, 7) }}", {}),
        ("{{ -1 ** z }} {{ -2.0 ** z }} {{ (-3) ** 2 }} {{ -n ** 2 }} {{ -2 ** 2 }}", {"z": 0, "n": 2}),
        ("{{ 2.5 is odd }}{{ 3.0 is odd }}{{ 4.0 is even }} {{ 0|select|list }} {{ none|map('upper')|list }}", {}),
        ("{{ '%s %s' % 1 }}", {}),
    ],
    "globals": [
        ("{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {% for i in range(2) %}{{ i }}{% endfor %}", {}),
        ("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }}", {}),
        ("{{ strftime_now('%Y-%m-%d %H:%M %B %d, %Y %a %b') }}", {}),
        ("{% set j = joiner(' | ') %}{% for x in 'abc' %}{{ j() }}{{ x }}{% endfor %}", {}),
    ],
    "undefined": [
        ("[{{ nope }}][{{ nope is defined }}][{{ nope|default('d') }}][{{ nope|length }}][{{ nope|list }}]", {}),
        ("{{ d.missing is defined }} {{ d['missing'] is defined }} [{{ d.missing }}] {{ nope == nope }} "
         "{{ nope == none }} {{ 'x' in nope }} {{ nope is none }}", {"d": D}),
        ("{{ xs[5] is defined }} [{{ xs[5] }}] {{ 'abc'[10] is defined }}", {"xs": [1]}),
        ("{% if not nope %}falsy{% endif %} {% if nope is not defined %}undefined{% endif %}", {}),
    ],
    "errors": [
        ("{{ raise_exception('Roles must alternate!') }}", {}),
        ("{{ nope.attr }}", {}),
        ("{{ d.missing.attr }}", {"d": D}),
        ("{{ xs[3].x }}", {"xs": [1]}),
        ("{{ 'a' + 1 }}", {}),
        ("{{ 1 + 'a' }}", {}),
        ("{{ 1 / 0 }}", {}),
        ("{{ 5 // 0 }}", {}),
        ("{{ nope + 1 }}", {}),
        ("{% for x in 5 %}{% endfor %}", {}),
        ("{{ 1 < 'a' }}", {}),
        ("{{ xs.append(1) }}", {"xs": []}),
        ("{% set a, b = [1, 2, 3] %}", {}),
        ("{% set x = 1 %}{% set x.y = 2 %}", {}),
        ("{{ 1 in 'abc' }}", {}),
        ("{{ nope() }}", {}),
        ("{{ 'x'|tojson }}{{ nope|tojson }}", {}),
        ("{{ range(200000)|length }}", {}),
    ],
}


def c_string(text):
    """A C++ string literal of text (UTF-8 kept, controls escaped)."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append("\\%03o" % ord(ch))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def main():
    env = transformers_env()
    out = ["// Generated by make_cases.py from Python's jinja2 (transformers' setup); do not edit.",
           "// Each case: template, variables as JSON, the text Python renders (or the message",
           "// of the error it raises), whether it renders."]
    for topic, cases in CASES.items():
        out.append(f"const JinjaCase kJinjaCases_{topic}[] = {{")
        for template, ctx in cases:
            try:
                want, ok = env.from_string(template).render(**ctx), True
            except Exception as e:  # noqa: BLE001 (the message is the expectation)
                want, ok = str(e), False
            out.append(f"    {{{c_string(template)},\n     {c_string(json.dumps(ctx, ensure_ascii=False))},\n"
                       f"     {c_string(want)},\n     {'true' if ok else 'false'}}},")
        out.append("};")
        out.append("")
    with open(os.path.join(HERE, "cases.inc"), "w", encoding="utf-8") as f:
        f.write("\n".join(out))
    print(f"wrote {sum(len(c) for c in CASES.values())} cases")


if __name__ == "__main__":
    main()
