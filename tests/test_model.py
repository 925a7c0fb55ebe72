from whale.model import weights_id


def test_tiny_model_has_content_hash(tiny_model_dir, tokenizer):
    wid = weights_id(tiny_model_dir)
    assert len(wid) == 12 and int(wid, 16) >= 0
    assert tokenizer.eos_token == "<|im_end|>"
