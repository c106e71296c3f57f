"""torch.nn's recurrent layers, stock, for the executor's tests. torch.fx
cannot trace them (their initial state is built from a traced size), so the
exporter takes them at aten level, where make_fx unrolls every time step into
matrix products, gates (unsafe_split) and element-wise ops."""
import torch


class _Last(torch.nn.Module):
    """Runs `rnn` on x and returns its output sequence (the states are dropped)."""

    def __init__(self, rnn):
        super().__init__()
        self.rnn = rnn

    def forward(self, x):
        return self.rnn(x)[0]


def GRU():
    """Factory: two stacked GRU layers, batch first."""
    return _Last(torch.nn.GRU(8, 16, num_layers=2, batch_first=True))


def LSTM():
    """Factory: a bidirectional LSTM, sequence first."""
    return _Last(torch.nn.LSTM(8, 12, bidirectional=True))


def RNN():
    """Factory: an Elman RNN with relu, two layers, batch first."""
    return _Last(torch.nn.RNN(8, 16, num_layers=2, nonlinearity="relu", batch_first=True))
