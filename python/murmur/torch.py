"""Mix a PyTorch model's parameters through a murmur agent, in the style of
Hivemind's Optimizer wrapper: your training loop stays yours.

    import torch, murmur.torch
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    mixer = murmur.torch.Mixer(model, opt, every=4, node_data_dir="/var/lib/h1",
                               seeds_seed="10.0.0.1:7000", model_spec="host:my-cnn")
    mixer.wait_ready()                  # a checkpoint or a peer's model, or yours
    for x, y in batches:
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
        mixer.step(samples=len(x))      # mixes every `every` steps, never blocks
    mixer.close()                       # graceful leave, final checkpoint

The parameters are flattened ONCE into one contiguous float32 buffer:
every parameter's .data becomes a view into it, so the agent reads and
updates the model in place with no per-step copy. When the agent adopts a
model (state transfer, checkpoint: mix returns "replaced") the optimizer's
state (momentum buffers) is cleared, as it no longer matches the weights.
CPU float32 parameters only (the agent works on host memory).
"""
import torch

from . import Agent


class Mixer:
    """A torch.nn.Module mixed through a murmur Agent every `every` steps."""

    def __init__(self, module, optimizer=None, every=1, agent=None, config=None,
                 settings=None, **kwargs):
        params = [p for p in module.parameters()]
        for p in params:
            if p.dtype != torch.float32 or p.device.type != "cpu":
                raise TypeError("murmur.torch.Mixer: parameters must be CPU float32 "
                                f"(got {p.dtype} on {p.device})")
        total = sum(p.numel() for p in params)
        flat = torch.empty(total, dtype=torch.float32)
        with torch.no_grad():
            at = 0
            for p in params:
                n = p.numel()
                flat[at:at + n].copy_(p.data.reshape(-1))
                p.data = flat[at:at + n].view_as(p)
                at += n
        self.module, self.optimizer, self.every = module, optimizer, max(1, int(every))
        self.flat = flat
        self.array = flat.numpy()  # shares memory with flat and the parameters
        self.agent = agent or Agent(config, settings, model=self.array, **kwargs)
        self._steps = 0
        self._samples = 0
        self.replaced = 0

    def _reset_optimizer(self):
        if self.optimizer is not None:
            self.optimizer.state.clear()

    def wait_ready(self, timeout=None):
        """Join: the model becomes the agent's (checkpoint, a peer's, or this
        one). Returns "own", "checkpoint" or "transfer"."""
        src = self.agent.wait_ready(self.array, timeout=timeout)
        if src != "own":
            self._reset_optimizer()
        return src

    def step(self, samples=0):
        """Call after each optimizer step. Returns what mixing did ("none",
        "mixed", "replaced")."""
        self._steps += 1
        self._samples += int(samples)
        if self._steps < self.every:
            return "none"
        r = self.agent.mix(self.array, steps=self._steps, samples=self._samples)
        self._steps = self._samples = 0
        if r == "replaced":
            self.replaced += 1
            self._reset_optimizer()
        return r

    @property
    def lr(self):
        return self.agent.lr

    def close(self):
        """Leave, apply pending mixing changes, final checkpoint."""
        return self.agent.close(self.array)
