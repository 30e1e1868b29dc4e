"""Exercise 08.fake_for_stable (easy): the stable-ABI operator under opcheck.

workbook_stable::add (csrc/stable/add.cpp) has a CPU kernel only: the stable ABI has no Meta kernel helpers in
this port, so opcheck's fake-tensor tests fail on it. Give it a fake kernel from Python: what shape, dtype and
device does its output have?
"""

import torch


def fake(self, other):
    return self.new_empty(())  # TODO
