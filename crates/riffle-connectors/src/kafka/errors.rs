//! What an error from the Kafka client means to a reader: one that passes by itself
//! (waited out), a position gone from the log (never skipped over), or the end of the
//! run. Shared by the source and by recovery's reading of a sink's topic.

/// Whether a topic-level error in a metadata answer passes by itself (a partition
/// whose leader is being elected), as against a topic that is not there.
pub(super) fn topic_error_passes(error: rdkafka::types::RDKafkaRespErr) -> bool {
    use rdkafka::types::RDKafkaRespErr as E;
    matches!(
        error,
        E::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE
            | E::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION
            | E::RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT
            | E::RD_KAFKA_RESP_ERR_BROKER_NOT_AVAILABLE
    )
}

/// What an error the consumer's poll returns means for the read.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum PollError {
    /// The connection to a broker failed for a moment; the client retries by itself.
    Passing,
    /// A partition's next offset is not in the log any more: reading on from elsewhere
    /// would skip records, silently.
    OffsetGone,
    /// Anything else ends the run (and a restart tries again).
    Fatal,
}

pub(super) fn poll_error(code: Option<rdkafka::types::RDKafkaErrorCode>) -> PollError {
    use rdkafka::types::RDKafkaErrorCode as Code;
    match code {
        Some(Code::AutoOffsetReset | Code::OffsetOutOfRange) => PollError::OffsetGone,
        Some(
            Code::BrokerTransportFailure
            | Code::AllBrokersDown
            | Code::Resolve
            | Code::OperationTimedOut
            | Code::RequestTimedOut
            | Code::NetworkException
            | Code::LeaderNotAvailable
            | Code::NotLeaderForPartition,
        ) => PollError::Passing,
        _ => PollError::Fatal,
    }
}

#[cfg(test)]
mod tests {
    use super::{poll_error, PollError};
    use rdkafka::types::RDKafkaErrorCode as Code;

    #[test]
    fn an_offset_no_longer_in_the_log_ends_the_read_instead_of_jumping() {
        assert_eq!(
            poll_error(Some(Code::AutoOffsetReset)),
            PollError::OffsetGone
        );
        assert_eq!(
            poll_error(Some(Code::OffsetOutOfRange)),
            PollError::OffsetGone
        );
    }

    #[test]
    fn a_topic_without_a_leader_yet_is_waited_for_and_a_missing_one_is_not() {
        use rdkafka::types::RDKafkaRespErr as E;
        assert!(super::topic_error_passes(
            E::RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE
        ));
        assert!(!super::topic_error_passes(
            E::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART
        ));
        assert!(!super::topic_error_passes(
            E::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED
        ));
    }

    #[test]
    fn a_lost_connection_is_waited_out_and_anything_else_is_fatal() {
        assert_eq!(poll_error(Some(Code::AllBrokersDown)), PollError::Passing);
        assert_eq!(
            poll_error(Some(Code::BrokerTransportFailure)),
            PollError::Passing
        );
        assert_eq!(
            poll_error(Some(Code::TopicAuthorizationFailed)),
            PollError::Fatal
        );
        assert_eq!(poll_error(None), PollError::Fatal);
    }
}
