"""Kernel-build progress: nothing for a fast compile, one display updated in place otherwise."""

from IPython.utils.capture import capture_output

from hlo_magic.progress import NotebookProgress, ProgressLine


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fast_compiles_show_nothing(shell):
    clock = Clock()
    progress = NotebookProgress("m", after=1.0, clock=clock)
    with capture_output() as cap:
        for done in range(4):
            clock.now += 0.1
            progress("build", done, 3)
        progress.finish()
    assert cap.outputs == []
    assert progress.last == ProgressLine("m", 3, 3, progress.last.seconds)


def test_slow_compiles_show_one_display_updated_in_place(shell):
    clock = Clock()
    progress = NotebookProgress("m", after=1.0, clock=clock)
    with capture_output() as cap:
        progress("passes", 0, 1)
        progress("build", 0, 12)
        clock.now += 1.5
        progress("build", 5, 12)
        clock.now += 1.0
        progress("build", 12, 12)
        progress.finish()
    texts = [out.data["text/plain"] for out in cap.outputs]
    assert texts == ["compiling m: 5/12 kernels built, 7 to go",
                     "compiling m: 12/12 kernels built, 0 to go",
                     "compiled m: 12 kernels built in 2.50 s"]
    ids = {out.transient["display_id"] for out in cap.outputs}
    assert len(ids) == 1 and [out.update for out in cap.outputs] == [False, True, True]
    assert '<progress value="5" max="12"></progress>' in cap.outputs[0].data["text/html"]
