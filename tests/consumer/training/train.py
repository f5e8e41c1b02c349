"""The team's entry point: a script every SageMaker launcher accepts (see the README)."""


def main() -> None:
    print("training")


def _mp_fn(index: int) -> None:  # the pytorchxla launcher calls this in each process
    main()


if __name__ == "__main__":
    main()
