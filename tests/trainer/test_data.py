"""Data: formats, packing with prompt masking, and a sample order that is the same for any world size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from trainer.base.errors import InputError
from trainer.base.flags.config import DataConfig
from trainer.data.packing import (
    IGNORE_INDEX,
    PackedData,
    SampleOrder,
    build_packed_data,
    check_enough,
    detect_format,
    epochs,
    epochs_warning,
    pack,
    read_local_records,
    render,
    step_batch,
)
from trainer.data.tokenizer import HFTokenizer, chat_pieces
from trainer.data.tokenizer_bytes import BOS_ID, EOS_ID, ByteTokenizer

ALPACA = {"instruction": "Add.", "input": "2 and 3", "output": "5"}
DIALOGSUM = {"dialogue": "#Person1#: Hi.\n#Person2#: Hello.", "summary": "They greet."}
CHAT = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "5"},
        {"role": "user", "content": "And 2 times 3?"},
        {"role": "assistant", "content": "6 ."},
    ]
}
# ChatML, as Qwen's templates write it (tokenizer_config.json chat_template), cut to its core.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def synthetic(seq_len: int = 16):
    return build_packed_data(DataConfig(dataset="synthetic", seq_len=seq_len), ByteTokenizer())


def test_formats_are_detected_from_the_fields() -> None:
    assert detect_format(CHAT) == "chat"
    assert detect_format(ALPACA) == "instruction"
    assert detect_format(DIALOGSUM) == "dialogsum"
    assert detect_format({"text": "x"}) == "text"
    with pytest.raises(InputError, match="auto"):
        detect_format({"question": "?"})


def test_instruction_prompts_are_masked_and_responses_trained() -> None:
    packed = pack([ALPACA], ByteTokenizer(), "instruction", seq_len=4)
    prompt, response = render(ALPACA, "instruction")
    assert "### Input:\n2 and 3" in prompt and response == "5"
    assert packed.tokens[0] == BOS_ID and packed.tokens[-1] == EOS_ID
    trained = packed.tokens[packed.trainable]
    assert trained.tolist() == [ord("5"), EOS_ID]


def test_dialogue_records_train_on_the_summary_only() -> None:
    packed = pack([DIALOGSUM], ByteTokenizer(), "dialogsum", seq_len=4)
    assert ByteTokenizer().decode(packed.tokens[packed.trainable].tolist()) == "They greet."


def test_a_sample_predicts_the_next_token_of_each_record_it_holds() -> None:
    data = pack([{"text": "one two"}, {"text": "three"}, {"text": "four five six"}], ByteTokenizer(), "text", 32)
    assert data.record_lengths.tolist() == [9, 7, 15]  # [bos] text [eos]
    assert data.num_samples == 1  # 8 + 6 + 14 positions
    inputs, labels, positions = data.sample(0)
    assert inputs.shape == labels.shape == positions.shape == (32,)
    starts = np.cumsum([0, 9, 7])
    read = [int(start) + j for start, length in zip(starts, (9, 7, 15), strict=True) for j in range(length - 1)]
    assert inputs[:28].tolist() == data.tokens[read].tolist()  # a block's records in stream order
    assert positions.tolist() == [*range(8), *range(6), *range(14), *range(4)]  # the padding counts on its own
    trained = labels[:28] != IGNORE_INDEX
    assert labels[:28][trained].tolist() == data.tokens[np.asarray(read) + 1][trained].tolist()
    assert (labels[28:] == IGNORE_INDEX).all()


def test_local_files_are_read_in_each_format(tmp_path: Path) -> None:
    jsonl = tmp_path / "data.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in (ALPACA, ALPACA)) + "\n")
    text = tmp_path / "data.txt"
    text.write_text("first document\n\nsecond\ndocument\n")
    assert read_local_records(jsonl) == [ALPACA, ALPACA]
    assert read_local_records(text) == [{"text": "first document"}, {"text": "second\ndocument"}]
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        read_local_records(broken)


def test_a_small_data_set_makes_a_padded_block_and_one_with_nothing_to_predict_is_refused(tmp_path: Path) -> None:
    small = tmp_path / "small.txt"
    small.write_text("tiny")
    data = build_packed_data(DataConfig(dataset=str(small), seq_len=64), ByteTokenizer())
    assert data.num_samples == 1 and data.blocks.filled() == 5  # [bos] tiny [eos]: 5 predictions
    single_tokens = PackedData(np.array([7, 8]), np.array([True, True]), 64, np.array([1, 1]))
    with pytest.raises(InputError, match="--dataset x: no record of 2 tokens or more"):
        check_enough(single_tokens, "--dataset x")


def test_sample_order_is_seeded_and_covers_each_epoch_once() -> None:
    order = SampleOrder(num_samples=10, seed=1)
    first_epoch = order.indices(0, 10)
    assert sorted(first_epoch.tolist()) == list(range(10))
    assert not np.array_equal(first_epoch, order.indices(10, 10))  # a new permutation each epoch
    assert np.array_equal(first_epoch, SampleOrder(10, seed=1).indices(0, 10))
    assert not np.array_equal(first_epoch, SampleOrder(10, seed=2).indices(0, 10))


def test_resuming_at_a_position_continues_the_same_order() -> None:
    whole = SampleOrder(50, seed=3).indices(0, 120)
    assert np.array_equal(SampleOrder(50, seed=3).indices(72, 48), whole[72:])


@pytest.mark.parametrize("dp_size, batch_size", [(1, 2), (2, 2), (4, 1), (8, 1)])
def test_the_global_batch_is_the_same_set_of_sequences_for_any_world_size(dp_size: int, batch_size: int) -> None:
    data, global_batch, consumed = synthetic(), 8, 24
    order = SampleOrder(data.num_samples, seed=0)
    expected = step_batch(data, order, consumed, global_batch, batch_size=8, dp_rank=0, dp_size=1)
    rows, token_counts = [], set()
    for rank in range(dp_size):
        batch = step_batch(data, order, consumed, global_batch, batch_size, rank, dp_size)
        assert len(batch.micro_batches) == global_batch // (batch_size * dp_size)
        rows += [tuple(row) for micro in batch.micro_batches for row in micro.inputs.tolist()]
        token_counts.add(batch.global_target_tokens)
    assert sorted(rows) == sorted(tuple(row) for row in expected.micro_batches[0].inputs.tolist())
    assert token_counts == {expected.global_target_tokens}


def test_ranks_train_on_different_rows() -> None:
    data = synthetic()
    order = SampleOrder(data.num_samples, seed=0)
    first, second = (step_batch(data, order, 0, 8, 2, rank, 2).micro_batches[0].inputs for rank in (0, 1))
    assert not np.array_equal(first, second)


def test_steps_that_make_many_epochs_of_a_small_data_set_are_pointed_out() -> None:
    """A data set of 800 packed sequences (dialogsum is of that order at 4096 tokens), 128 per step, 1000 steps."""
    assert epochs(1000, 128, 800) == 160
    warning = epochs_warning(1000, 128, 800)
    assert warning == (
        "--steps 1000: 160 epochs of the data set (800 sequences, 128 per step); one epoch is 7 steps, "
        "and fine-tuning usually runs a few"
    )
    assert epochs_warning(60, 128, 800) is None  # 9.6 epochs


def chat_tokenizer(directory: Path, template: str | None = CHATML) -> HFTokenizer:
    """A word-level tokenizer made here (no download), saved and loaded as the trainer loads any: the special tokens
    whole, words and punctuation apart, whitespace dropped."""
    from tokenizers import Tokenizer as Backend
    from tokenizers import models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "system", "user", "assistant", "Be", "brief", ".", "What", "is", "2", "+", "3", "?", "5",
             "And", "times", "6"]  # fmt: skip
    backend = Backend(models.WordLevel({word: i for i, word in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<|im_start|>", eos_token="<|im_end|>", unk_token="<unk>"
    )
    if template:
        fast.chat_template = template
    fast.save_pretrained(directory)
    return HFTokenizer(str(directory))


def test_chat_records_train_on_the_assistant_turns_only(tmp_path: Path) -> None:
    tokenizer = chat_tokenizer(tmp_path / "tokenizer")
    packed = pack([CHAT, CHAT], tokenizer, "chat", seq_len=8)
    tokens = tokenizer._tokenizer.convert_ids_to_tokens(packed.tokens.tolist())
    masked = [(token, bool(trained)) for token, trained in zip(tokens, packed.trainable, strict=True)]
    header = [("<|im_start|>", False), ("assistant", False)]
    conversation = [
        *[("<|im_start|>", False), ("system", False), ("Be", False), ("brief", False), (".", False)],
        *[("<|im_end|>", False), ("<|im_start|>", False), ("user", False), ("What", False), ("is", False)],
        *[("2", False), ("+", False), ("3", False), ("?", False), ("<|im_end|>", False)],
        *header, ("5", True), ("<|im_end|>", True),
        *[("<|im_start|>", False), ("user", False), ("And", False), ("2", False), ("times", False), ("3", False)],
        *[("?", False), ("<|im_end|>", False)],
        *header, ("6", True), (".", True), ("<|im_end|>", True),
    ]  # fmt: skip
    assert masked == conversation * 2  # the template writes every token: no bos or eos added around a record


def test_chat_pieces_follow_the_template_and_refuse_one_that_rewrites_the_past() -> None:
    def tagged(turns: list[dict[str, str]], add_generation_prompt: bool) -> str:
        text = "".join(f"[{turn['role']}]{turn['content']}[end]" for turn in turns)
        return text + ("[assistant]" if add_generation_prompt else "")

    assert chat_pieces(CHAT["messages"][1:3], tagged) == [
        ("[user]What is 2 + 3?[end][assistant]", False),
        ("5[end]", True),
    ]

    def forgetful(turns: list[dict[str, str]], add_generation_prompt: bool) -> str:
        """Like templates that drop earlier assistant turns' reasoning once another turn follows."""
        text = "".join(f"[{t['role']}]{'...' if t is not turns[-1] else t['content']}[end]" for t in turns)
        return text + ("[assistant]" if add_generation_prompt else "")

    with pytest.raises(InputError, match=r"--dataset-format chat: .* turn 2 \(assistant\)"):
        chat_pieces(CHAT["messages"], forgetful)
    with pytest.raises(InputError, match="--dataset-format chat: a turn of 'messages' is not a"):
        chat_pieces([{"role": "user"}], tagged)


# Qwen3's rules for assistant turns (Qwen/Qwen3-8B tokenizer_config.json chat_template), written here in short: a
# turn after the last user query that is the conversation's last, or has reasoning, is written with its reasoning
# block (an empty one if it has none); earlier turns are written without their reasoning.
QWEN3_RULES = (
    "{%- set ns = namespace(last_query=-1) %}"
    "{%- for m in messages %}{%- if m.role == 'user' %}{%- set ns.last_query = loop.index0 %}{%- endif %}{%- endfor %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' %}"
    "{%- set content = m.content.split('</think>')[-1].lstrip('\\n') %}"
    "{%- set reasoning = m.content.split('</think>')[0].split('<think>')[-1].strip('\\n') "
    "if '</think>' in m.content else '' %}"
    "{%- if loop.index0 > ns.last_query and (loop.last or reasoning) %}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content }}"
    "{%- else %}{{- '<|im_start|>assistant\\n' + content }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def test_a_qwen3_conversation_of_several_assistant_turns_is_cut_from_one_render(tmp_path: Path) -> None:
    """Rendered up to its first answer, the conversation writes that answer with an empty reasoning block; the whole
    conversation writes it without (another query follows). The pieces are the whole render's, cut at its turns."""
    tokenizer = chat_tokenizer(tmp_path / "qwen3", template=QWEN3_RULES)
    turns = [*CHAT["messages"][1:3], CHAT["messages"][3], {"role": "assistant", "content": "<think>x</think>6 ."}]
    render = tokenizer._tokenizer.apply_chat_template
    whole = render(turns, tokenize=False)
    assert not whole.startswith(render(turns[:2], tokenize=False))  # the turn-by-turn prefixes do not hold
    pieces = tokenizer.chat_segments(turns)
    assert "".join(text for text, _ in pieces) == whole
    assert [text for text, trained in pieces if trained] == [
        "5<|im_end|>\n",
        "<think>\nx\n</think>\n\n6 .<|im_end|>\n",
    ]
    assert pieces[0] == ("<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n", False)


def test_chat_pieces_are_those_of_the_turn_by_turn_prompts_where_those_hold() -> None:
    """For a template whose renders of the first turns are prefixes of the whole (ChatML, Llama 3's), the one-render
    cut trains from the end of each generation prompt to the end of its turn, as each turn's own prompt would."""

    def tagged(turns: list[dict[str, str]], add_generation_prompt: bool) -> str:
        text = "".join(f"<{turn['role']}>{turn['content'].strip()}</{turn['role']}>" for turn in turns)
        return text + ("<assistant>" if add_generation_prompt else "")

    messages = CHAT["messages"]
    pieces = chat_pieces(messages, tagged)
    for index in (2, 4):
        prompt, through = tagged(messages[:index], True), tagged(messages[: index + 1], False)
        assert (through[len(prompt) :], True) in pieces


def test_a_tokenizer_without_a_chat_template_is_refused_by_flag(tmp_path: Path) -> None:
    with pytest.raises(
        InputError, match=r"--dataset-format chat: the tokenizer .* has no chat template; give --tokenizer"
    ):
        pack([CHAT], chat_tokenizer(tmp_path / "plain", template=None), "chat", seq_len=8)
    with pytest.raises(InputError, match="--dataset-format chat: the byte tokenizer has no chat template"):
        pack([CHAT], ByteTokenizer(), "chat", seq_len=8)
    with pytest.raises(InputError, match="--dataset-format chat: a record has no field 'messages'"):
        pack([ALPACA], chat_tokenizer(tmp_path / "chat"), "chat", seq_len=8)


def test_a_cache_entry_is_staged_in_a_directory_no_other_writer_can_share(tmp_path: Path) -> None:
    """Pods on different nodes write into one shared directory, and containers' PIDs repeat: a staging directory named
    by the PID would be another pod's, deleted under it. Another writer's staging survives this one's write."""
    import os

    from trainer.data.cache import write_entry

    config = DataConfig(dataset="synthetic", seq_len=16)
    packed = build_packed_data(config, ByteTokenizer())
    other = tmp_path / f".key.{os.getpid()}.tmp"  # what a pod with the same PID would be writing now
    other.mkdir()
    (other / "tokens.npy").write_bytes(b"another pod's half-written entry")
    entry = write_entry(tmp_path, "key", packed, config, ByteTokenizer())
    assert (other / "tokens.npy").read_bytes() == b"another pod's half-written entry"
    assert np.array_equal(np.load(entry / "tokens.npy"), packed.tokens)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".key.") and p != other] == []
