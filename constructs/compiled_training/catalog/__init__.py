"""The catalog: data and pure look-ups about AWS, no CDK.

The Deep Learning Container image matrix (`dlc`), SageMaker instance facts (`instances`), the
SageMaker API's shapes from botocore's model (`api_shapes`), on-demand prices (`prices`), AWS's
Neuron training images (`neuron`) and Hugging Face's ``TrainingArguments`` fields
(`training_arguments`).

May import: the standard library, botocore, the runtime's `contract`; of the library, only the
catalog. Everything above reads it; a new accelerator family or image adds its rows here.
"""
