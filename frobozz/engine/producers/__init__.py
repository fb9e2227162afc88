"""Things that put messages on a session's queue: a person typing, and producers that wake a session
nobody watches (a schedule, an inbox, a feed), which remember what they delivered through `Deliveries`."""

from ._feed import Feed
from ._human import HumanInput
from ._inbox import Inbox, check_mailbox, parse_url
from ._items import OUTSIDE, Deliveries, Item, MemoryDeliveries, clean, clean_text
from ._mail import html_text, mail_item
from ._polling import Polling, ProducerError
from ._schedule import Schedule, check_cron, zone

__all__ = [
    "OUTSIDE",
    "Deliveries",
    "Feed",
    "HumanInput",
    "Inbox",
    "Item",
    "MemoryDeliveries",
    "Polling",
    "ProducerError",
    "Schedule",
    "check_cron",
    "check_mailbox",
    "clean",
    "clean_text",
    "html_text",
    "mail_item",
    "parse_url",
    "zone",
]
