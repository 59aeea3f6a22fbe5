"""Stand-in: the SM70 n-gram id kernel is not part of these tests."""

SM70_PLE_NGRAM = None


def sm70_ple_ngram_ids(*args, **kwargs):
    raise NotImplementedError("the stand-in engine has no SM70 n-gram kernel")
