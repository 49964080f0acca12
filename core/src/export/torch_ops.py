# The ops benchkit's graphs use beyond torch.nn's layers, with the same
# semantics as benchkit's own implementation of them.


def pad_map(x, h, w):
    """Zero-pad a [batch, H, W, C] map at the bottom and right to [h, w]."""
    h0, w0 = x.shape[1], x.shape[2]
    if h > h0 or w > w0:
        x = F.pad(x, (0, 0, 0, w - w0, 0, h - h0))
    return x


def patch_merge(x):
    """[batch, H, W, C] to [batch, ceil(H/2), ceil(W/2), 4C], each 2x2
    neighbourhood concatenated in Swin's order (0,0), (1,0), (0,1), (1,1)."""
    b, h, w, c = x.shape
    h2, w2 = (h + 1) // 2, (w + 1) // 2
    x = pad_map(x, 2 * h2, 2 * w2)
    return x.reshape(b, h2, 2, w2, 2, c).permute(0, 1, 3, 4, 2, 5).reshape(b, h2, w2, 4 * c)


def token_mean(x):
    """The mean over every axis but the batch and the last."""
    return x.flatten(1, -2).mean(1)


class Attention(nn.Module):
    """Multi-head scaled dot-product attention; with `memory`, the queries
    come from `x` and the keys and values from `memory` (rows of one joint
    projection)."""

    def __init__(self, dim, heads, bias):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x, memory=None):
        b, n, d = x.shape
        if memory is None:
            q, k, v = self.qkv(x).chunk(3, -1)
        else:
            w, bias = self.qkv.weight, self.qkv.bias
            q = F.linear(x, w[:d], None if bias is None else bias[:d])
            k, v = F.linear(memory, w[d:], None if bias is None else bias[d:]).chunk(2, -1)

        def split(t):
            return t.reshape(b, t.shape[1], self.heads, d // self.heads).transpose(1, 2)

        out = F.scaled_dot_product_attention(split(q), split(k), split(v))
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class WindowAttention(nn.Module):
    """Swin's (shifted) window attention with a relative position bias on an
    h x w map, [batch, h, w, dim]. A map no larger than the window is one
    window, unshifted."""

    def __init__(self, dim, heads, window, shift, h, w):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
        win, shift = (min(h, w), 0) if min(h, w) <= window else (window, shift)
        self.win, self.shift = win, shift
        self.padded = (-(-h // win) * win, -(-w // win) * win)
        n, span = win * win, 2 * window - 1
        index = [
            ((i // win) - (j // win) + window - 1) * span + (i % win) - (j % win) + window - 1
            for i in range(n)
            for j in range(n)
        ]
        self.register_buffer("relative_index", torch.tensor(index), persistent=False)
        mask = None
        if shift > 0:
            hp, wp = self.padded

            def region(p, size):
                return 0 if p < size - win else (1 if p < size - shift else 2)

            rows = []
            for wy in range(hp // win):
                for wx in range(wp // win):
                    label = [region(wy * win + t // win, hp) * 3 + region(wx * win + t % win, wp) for t in range(n)]
                    rows.append([[0.0 if a == c else -100.0 for c in label] for a in label])
            mask = torch.tensor(rows)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, h, w, c = x.shape
        win, shift, heads = self.win, self.shift, self.heads
        hp, wp = self.padded
        nh, nw = hp // win, wp // win
        windows, n = nh * nw, win * win
        x = pad_map(x, hp, wp)
        if shift > 0:
            x = torch.roll(x, (-shift, -shift), (1, 2))
        tokens = x.reshape(b, nh, win, nw, win, c).permute(0, 1, 3, 2, 4, 5).reshape(b * windows, n, c)
        q, k, v = (t.reshape(b * windows, n, heads, c // heads).transpose(1, 2) for t in self.qkv(tokens).chunk(3, -1))
        bias = self.bias_table[self.relative_index].reshape(n, n, heads).permute(2, 0, 1).unsqueeze(0)
        if self.mask is not None:
            bias = (bias + self.mask.unsqueeze(1)).repeat(b, 1, 1, 1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        out = self.proj(out.transpose(1, 2).reshape(b * windows, n, c))
        x = out.reshape(b, nh, nw, win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(b, hp, wp, c)
        if shift > 0:
            x = torch.roll(x, (shift, shift), (1, 2))
        return x[:, :h, :w]


class ClassToken(nn.Module):
    """Prepends a learned token: [batch, n, dim] to [batch, n + 1, dim]."""

    def __init__(self, dim):
        super().__init__()
        self.token = nn.Parameter(torch.zeros(1, dim))

    def forward(self, x):
        return torch.cat([self.token.expand(x.shape[0], 1, -1), x], 1)


class PosEmbed(nn.Module):
    """Adds a learned [tokens, dim] position embedding."""

    def __init__(self, tokens, dim):
        super().__init__()
        self.pos = nn.Parameter(torch.randn(tokens, dim) * 0.02)

    def forward(self, x):
        return x + self.pos


class L2Norm(nn.Module):
    """Each position's channel vector to unit length, times a learned weight per channel."""

    def __init__(self, channels, scale):
        super().__init__()
        self.weight = nn.Parameter(torch.full((channels,), scale))

    def forward(self, x):
        return self.weight.view(1, -1, 1, 1) * F.normalize(x, dim=1)


def lstm(layer, x, h0=None, c0=None):
    """One LSTM layer over [batch, tokens, input]; the outputs of every step."""
    state = None if h0 is None else (h0.unsqueeze(0).contiguous(), c0.unsqueeze(0).contiguous())
    return layer(x, state)[0]
