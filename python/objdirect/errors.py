"""Typed exceptions of the objdirect package.

Every failure of libobjdirect becomes an ObjDirectError subclass, chosen in exactly one place:
_from_native(), which the extension calls with the error's libobjdirect code, S3 code, HTTP status
and message. Catch the S3 code you care about by class::

    try:
        client.get("bucket", "missing")
    except objdirect.NoSuchKey as e:
        print(e.code, e.http_status, e.message)

Attributes of every ObjDirectError: ``code`` (the S3 error code, e.g. "NoSuchKey"; libobjdirect's
local errors use the S3 code of their table row, e.g. "ServiceUnavailable" for an unreachable
server), ``errc`` (libobjdirect's name, e.g. "no_such_key", "unavailable"), ``http_status``,
``message`` and ``request_id`` (the server's x-amz-request-id of the failed request, as in its
access log; None for errors that no server reply carried, e.g. an unreachable endpoint).

Classes that are also builtin exceptions, so generic handlers keep working: NoSuchKey and
NoSuchBucket are KeyError-like lookups but subclass only ObjDirectError (a KeyError's str() quotes
its argument); InvalidArgument is a ValueError; Timeout is a TimeoutError; Unavailable is a
ConnectionError; DeviceBufferNotSupported is a NotImplementedError.

Thread safety: exceptions are plain values.
"""

from __future__ import annotations

import re

__all__ = [
    "ObjDirectError",
    "NoSuchKey",
    "NoSuchBucket",
    "NoSuchUpload",
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "InvalidArgument",
    "InvalidRange",
    "InvalidBucketName",
    "BucketAlreadyExists",
    "BucketAlreadyOwnedByYou",
    "BucketNotEmpty",
    "PreconditionFailed",
    "EntityTooLarge",
    "SlowDown",
    "Unavailable",
    "Timeout",
    "InternalError",
    "RDMATransferFailed",
    "TransportError",
    "DeviceBufferNotSupported",
]


class ObjDirectError(Exception):
    """Base class of every objdirect error."""

    code = "InternalError"
    errc = "internal"
    http_status = 500

    def __init__(self, message, *, code=None, errc=None, http_status=None, request_id=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if errc is not None:
            self.errc = errc
        if http_status is not None:
            self.http_status = http_status
        self.request_id = request_id

    def __str__(self):
        return f"{self.code}: {self.message}"

    def __reduce__(self):
        # Picklable (DataLoader workers send exceptions to the main process).
        return (_rebuild, (type(self), self.message, self.code, self.errc, self.http_status,
                           self.request_id))


def _rebuild(cls, message, code, errc, http_status, request_id):
    return cls(message, code=code, errc=errc, http_status=http_status, request_id=request_id)


class NoSuchKey(ObjDirectError):
    code, errc, http_status = "NoSuchKey", "no_such_key", 404


class NoSuchBucket(ObjDirectError):
    code, errc, http_status = "NoSuchBucket", "no_such_bucket", 404


class NoSuchUpload(ObjDirectError):
    code, errc, http_status = "NoSuchUpload", "no_such_upload", 404


class AccessDenied(ObjDirectError):
    code, errc, http_status = "AccessDenied", "access_denied", 403


class SignatureDoesNotMatch(AccessDenied):
    code, errc, http_status = "SignatureDoesNotMatch", "signature_does_not_match", 403


class InvalidAccessKeyId(AccessDenied):
    code, errc, http_status = "InvalidAccessKeyId", "invalid_access_key_id", 403


class InvalidArgument(ObjDirectError, ValueError):
    code, errc, http_status = "InvalidArgument", "invalid_argument", 400


class InvalidRange(ObjDirectError):
    code, errc, http_status = "InvalidRange", "invalid_range", 416


class InvalidBucketName(ObjDirectError):
    code, errc, http_status = "InvalidBucketName", "invalid_bucket_name", 400


class BucketAlreadyExists(ObjDirectError):
    code, errc, http_status = "BucketAlreadyExists", "bucket_already_exists", 409


class BucketAlreadyOwnedByYou(ObjDirectError):
    code, errc, http_status = "BucketAlreadyOwnedByYou", "bucket_already_owned_by_you", 409


class BucketNotEmpty(ObjDirectError):
    code, errc, http_status = "BucketNotEmpty", "bucket_not_empty", 409


class PreconditionFailed(ObjDirectError):
    code, errc, http_status = "PreconditionFailed", "precondition_failed", 412


class EntityTooLarge(ObjDirectError):
    code, errc, http_status = "EntityTooLarge", "entity_too_large", 400


class SlowDown(ObjDirectError):
    code, errc, http_status = "SlowDown", "slow_down", 503


class Unavailable(ObjDirectError, ConnectionError):
    code, errc, http_status = "ServiceUnavailable", "unavailable", 503


class Timeout(ObjDirectError, TimeoutError):
    code, errc, http_status = "RequestTimeout", "timeout", 400


class InternalError(ObjDirectError):
    code, errc, http_status = "InternalError", "internal", 500


class RDMATransferFailed(ObjDirectError):
    code, errc, http_status = "RDMATransferFailed", "rdma_transfer_failed", 500


class TransportError(ObjDirectError):
    code, errc, http_status = "InternalError", "transport_error", 500


class DeviceBufferNotSupported(ObjDirectError, NotImplementedError):
    """A GPU buffer was passed and this build has no GPU data path; nothing was transferred."""

    code, errc, http_status = "NotImplemented", "not_implemented", 501


# libobjdirect errc name -> class. Errcs not listed map by their S3 code below, else to the base.
_BY_ERRC = {
    cls.errc: cls
    for cls in (NoSuchKey, NoSuchBucket, NoSuchUpload, AccessDenied, SignatureDoesNotMatch,
                InvalidAccessKeyId, InvalidArgument, InvalidRange, InvalidBucketName,
                BucketAlreadyExists, BucketAlreadyOwnedByYou, BucketNotEmpty, PreconditionFailed,
                EntityTooLarge, SlowDown, Unavailable, Timeout, InternalError, RDMATransferFailed,
                TransportError)
}
_BY_ERRC["expired_token"] = AccessDenied
_BY_ERRC["too_many_keys"] = InvalidArgument
_BY_ERRC["io_error"] = InternalError
_BY_ERRC["corrupt"] = InternalError


# libobjdirect ends the message of an error from a server reply in " (RequestId: ID)"
# (client::request_id_note in src/client/http_client.cc).
_REQUEST_ID = re.compile(r" \(RequestId: ([^()\s]+)\)$")


def _from_native(errc, s3_code, http_status, message, request_id=None):
    """The one conversion from a libobjdirect error to a Python exception (called by _objdirect)."""
    m = _REQUEST_ID.search(message or "")
    if m:
        message = message[:m.start()]
        request_id = request_id or m.group(1)
    cls = _BY_ERRC.get(errc, ObjDirectError)
    return cls(message or s3_code, code=s3_code, errc=errc, http_status=http_status,
               request_id=request_id)
