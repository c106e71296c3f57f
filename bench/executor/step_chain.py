"""A chain of N 1x1 convolutions with relu on a 1x16x1x1 input: each step's work is
next to nothing, so kiln-run's time per run over its step count is what a step costs
before any arithmetic (the thread team's fork and join, the kernel's call).

  python3 tools/export_fx.py bench.executor.step_chain:StepChain --input-shape 1,16,1,1 \\
      --level aten [--quantize x86] --seed 0 --out DIR
  kiln-run DIR [--passes quantization] --threads T --iterations 500 --warmup 50
"""
import torch


class StepChain(torch.nn.Module):
    def __init__(self, steps=60, channels=16):
        super().__init__()
        self.convs = torch.nn.ModuleList(torch.nn.Conv2d(channels, channels, 1) for _ in range(steps))

    def forward(self, x):
        for conv in self.convs:
            x = torch.relu(conv(x))
        return x
