"""Re-renders testdata/conformance.json with jinja2 set up as transformers'
apply_chat_template sets it up, and reports any case whose want differs.
Not run by go test (it needs Python and jinja2): run it by hand when the
cases change, from the chat directory: python3 testdata/jinja2_check.py
"""
import datetime
import json
import sys

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(jinja2.ext.Extension):
    # transformers' {% generation %}: renders its body.
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation"), [], [], body).set_lineno(lineno)

    def _generation(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


def render(case):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(case["template"]).render(
        messages=case["messages"], tools=None, documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        bos_token=case["bos"], eos_token=case["eos"])


def main():
    with open("testdata/conformance.json", encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    bad = 0
    for c in cases:
        got = render(c)
        if got != c["want"]:
            bad += 1
            print(f"DIFF {c['name']} (add_generation_prompt={c['add_generation_prompt']})\n got  {got!r}\n want {c['want']!r}")
    print(f"jinja2 {jinja2.__version__}: {len(cases) - bad} of {len(cases)} cases agree")
    sys.exit(1 if bad else 0)


main()
