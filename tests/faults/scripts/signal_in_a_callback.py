"""A plain training script to which a signal comes while Python runs a weakref callback
(as one does whenever a signal lands while tensors are freed): at step 2 a callback sends
the signal named by ``SIGNAL`` to the process itself. Prints ``stepped K`` after each step
and ``done`` at the end."""

import os
import signal
import weakref

import torch

SIGNUM = getattr(signal, os.environ["SIGNAL"])


class Box:
    pass


def freed(_) -> None:
    os.kill(os.getpid(), SIGNUM)
    for _ in range(10_000):  # the handler runs here, inside the callback
        pass


model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    if step == 2:
        box = Box()
        ref = weakref.ref(box, freed)
        del box
    loss = model(torch.randn(3, 4)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("stepped", step, flush=True)
print("done", flush=True)
