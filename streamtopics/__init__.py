"""streamtopics: anchor-word topic models kept fresh over live document streams.

>>> from streamtopics import StreamingTopicModel
>>> model = StreamingTopicModel(n_topics=20)   # learns its vocabulary from the stream
"""

from .text.documents import DocumentBatch, Rejection
from .model import StreamingTopicModel
from .snapshot import TopicSnapshot
from .state import CorruptStateError
from .text.tokenizer import Tokenizer
from .text.vocabulary import Vocabulary

__all__ = [
    "CorruptStateError",
    "DocumentBatch",
    "Rejection",
    "StreamingTopicModel",
    "Tokenizer",
    "TopicSnapshot",
    "Vocabulary",
]
__version__ = "0.1.0"
