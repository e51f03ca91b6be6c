from tests.storage_config.helpers import eu_gcs_server

__all__ = ["eu_gcs_server"]
