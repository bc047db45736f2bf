#!/bin/sh
# arch-synth-golden.sh: write testdata/arch_synth_golden.jsonl, llama.cpp's
# greedy continuations on tiny synthetic models of the families that
# ../shared/models/arch does not cover (or covers with a file llama.cpp
# refuses), for TestArchSynthGolden. Each model is `gotok gen --preset tiny
# --layers 4 --arch A --type f32` with the SmolLM2 tokenizer, seed 1 (four
# layers: SmolLM3's fourth has no RoPE, Gemma's alternate local and
# global): the test writes
# the same model again from the same code, so only the continuations are
# stored. Needs llama.cpp's llama-completion ($LLAMA_COMPLETION).
set -eu
LLAMA_COMPLETION=${LLAMA_COMPLETION:-llama-completion}
cd "$(dirname "$0")/.."
tok=../shared/tokenizer-tests/smollm2-135m-instruct/tokenizer.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/gotok" ./cmd/gotok
out=testdata/arch_synth_golden.jsonl
: >"$out.tmp"
# json_string writes $1 as the inside of a JSON string.
json_string() {
	printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' | awk 'BEGIN { ORS = "" } NR > 1 { print "\\n" } { print }'
}
# The prompts: two of their own, then testdata/arch_more_prompts.txt's, one
# a line (\n and \t as printf's %b writes them).
prompts=$tmp/prompts
{
	printf '%s\n' "Once upon a time" "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16"
	cat testdata/arch_more_prompts.txt
} >"$prompts"
for arch in qwen2 qwen3 granite olmo2 gemma2 gemma3 phi3 smollm3 mistral3; do
	"$tmp/gotok" gen -o "$tmp/$arch.gguf" --preset tiny --layers 4 --arch "$arch" --type f32 --tokenizer "$tok" 2>/dev/null
	while IFS= read -r line; do
		prompt=$(printf '%b' "$line")
		text=$("$LLAMA_COMPLETION" -m "$tmp/$arch.gguf" -p "$prompt" -n 24 --temp 0 -no-cnv --no-display-prompt -c 256 2>/dev/null | base64 -w0)
		printf '{"model": "%s", "prompt": "%s", "n_predict": 24, "out_b64": "%s"}\n' "$arch" "$(json_string "$prompt")" "$text" >>"$out.tmp"
	done <"$prompts"
done
mv "$out.tmp" "$out"
echo "wrote $(wc -l <"$out") continuations to $out"

# Other prompts on the files of ../shared/models/arch, for TestArchGolden
# beside their own golden.jsonl: testdata/arch_more_prompts.txt, one a line
# (\n and \t as printf's %b writes them): longer ones (past Gemma 3's window
# of 8), non-ASCII text, code, whitespace. OLMo 2's file is left out:
# llama.cpp refuses it (TestArchSynthGolden has an OLMo 2 it loads).
out=testdata/arch_more_golden.jsonl
: >"$out.tmp"
while IFS= read -r line; do
	prompt=$(printf '%b' "$line")
	json=$(json_string "$prompt")
	for f in qwen3 granite gemma3 llama llama3 mistral; do
		text=$("$LLAMA_COMPLETION" -m "../shared/models/arch/$f.gguf" -p "$prompt" -n 24 --temp 0 -no-cnv --no-display-prompt 2>/dev/null | base64 -w0)
		printf '{"model": "%s.gguf", "prompt": "%s", "n_predict": 24, "out_b64": "%s"}\n' "$f" "$json" "$text" >>"$out.tmp"
	done
done <testdata/arch_more_prompts.txt
mv "$out.tmp" "$out"
echo "wrote $(wc -l <"$out") continuations to $out"
