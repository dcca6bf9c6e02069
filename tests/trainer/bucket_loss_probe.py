"""Run the trainer with its artifacts bucket deleted right after the start: the durable tier was there when the run
looked for a checkpoint to resume from, and every save to it fails from then on, with S3's own error (NoSuchBucket).

Launched like the trainer (`python -m tests.trainer.bucket_loss_probe <trainer flags>`), it runs `trainer.main.main`
unchanged but for `Checkpointer.restore`, after which rank 0 empties and deletes the bucket of --artifacts-uri.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from trainer.base.s3.transfer import client as s3_client
    from trainer.checkpoint.checkpointer import Checkpointer, TrainState
    from trainer.main import main as trainer_main

    restore = Checkpointer.restore

    def restore_then_lose_the_bucket(self: Checkpointer, state: TrainState) -> None:
        restore(self, state)
        if self.env.is_leader and self.durable is not None:
            bucket, client = self.durable.root.bucket, s3_client()
            for item in client.list_objects_v2(Bucket=bucket).get("Contents", []):
                client.delete_object(Bucket=bucket, Key=item["Key"])
            client.delete_bucket(Bucket=bucket)

    Checkpointer.restore = restore_then_lose_the_bucket  # type: ignore[method-assign]
    return trainer_main(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
