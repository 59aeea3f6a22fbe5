"""Stand-in AutoWeightsLoader: parameters and buffers by dotted name."""


class AutoWeightsLoader:
    def __init__(self, module, skip_prefixes=None):
        self.module = module

    def load_weights(self, weights):
        params = dict(self.module.named_parameters())
        buffers = dict(self.module.named_buffers())
        loaded = set()
        for name, tensor in weights:
            if name in params:
                param = params[name]
                loader = getattr(param, "weight_loader", None)
                if loader is not None:
                    loader(param, tensor)
                else:
                    param.data.copy_(tensor)
            elif name in buffers:
                buffers[name].copy_(tensor)
            else:
                raise ValueError(f"There is no module or parameter named {name!r}")
            loaded.add(name)
        return loaded
