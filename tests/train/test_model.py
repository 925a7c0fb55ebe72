from whale.model import weights_id


def test_tiny_model_has_content_hash(tiny_model_dir, tokenizer):
    wid = weights_id(tiny_model_dir)
    assert len(wid) == 12 and int(wid, 16) >= 0
    assert tokenizer.eos_token == "<|im_end|>"


def test_in_memory_and_saved_weights_ids_agree(tiny_model_dir, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from whale.model import model_weights_id

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert model_weights_id(model) == weights_id(tiny_model_dir)
    with torch.no_grad():
        next(model.parameters()).add_(1e-3)
    model.save_pretrained(tmp_path)
    assert model_weights_id(model) == weights_id(tmp_path) != weights_id(tiny_model_dir)
