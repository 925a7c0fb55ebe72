"""The offline proposer's layers as ordinary Python: one class per layer, rendered into a
harness's text by ``harnesses.proposers.primitives.render`` (slots filled, names renamed).

A class here subclasses a stand-in ``Harness`` (the harness below the layer); its body is what the
layer appends under ``class Harness(Harness):``. The primitives in the sibling domain modules say
when a layer applies and what fills its slots; these modules say what it does.
"""
